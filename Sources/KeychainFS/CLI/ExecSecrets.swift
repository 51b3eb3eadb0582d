import Glibc
import Support
import VaultCore

/// The secrets one `keychainfs exec` hands its command, all in one locked buffer: environment
/// entries as `NAME=value` C strings (ready for the child's environment, pointed into, never
/// copied), and the contents of its files.
struct ExecSecrets: ~Copyable {
    private var buffer: SecureBuffer
    /// Each entry's bytes in the buffer, its NUL included; `nameLength` bytes of name before '='.
    private var environmentEntries: [(range: Range<Int>, nameLength: Int)] = []
    private(set) var files: [(name: ItemName, range: Range<Int>)] = []

    init() throws(VaultError) {
        buffer = try SecureBuffer(capacity: 4096)
    }

    var hasFiles: Bool { !files.isEmpty }

    /// `name` as an environment variable name: ASCII letters made upper case, digits kept
    /// (a leading one after '_'), every other byte '_'. `db-password` is `DB_PASSWORD`.
    static func variableName(for name: ItemName) -> [UInt8] {
        name.withUnsafeBytes { bytes in
            var converted: [UInt8] = bytes.first.map { (0x30...0x39).contains($0) } == true ? [UInt8(ascii: "_")] : []
            for byte in bytes {
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"): converted.append(byte - 0x20)
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"): converted.append(byte)
                default: converted.append(UInt8(ascii: "_"))
                }
            }
            return converted
        }
    }

    /// Whether `name` is one a shell takes: [A-Za-z_][A-Za-z0-9_]*.
    static func isVariableName(_ name: some Collection<UInt8>) -> Bool {
        guard let first = name.first, !(0x30...0x39).contains(first) else { return false }
        return name.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x5F
        }
    }

    /// Adds `NAME=value`. Refuses a value holding a NUL byte (an environment string ends at
    /// the first) and a name given twice. `name` is wiped once copied.
    mutating func addVariable(_ name: inout [UInt8], _ value: borrowing SecureBuffer) throws(CommandFailure) {
        defer { for index in name.indices { name[index] = 0 } }
        let printable = String(decoding: name, as: UTF8.self)
        guard value.withUnsafeBytes({ $0.firstIndex(of: 0) }) == nil else {
            throw CommandFailure(message: "\(printable): the item holds a NUL byte, which an environment variable cannot; use --files",
                                 status: .invalidInput)
        }
        guard !hasVariable(named: name) else {
            throw CommandFailure(message: "\(printable): two secrets would set this variable", status: .invalidInput)
        }
        let start = buffer.count
        do throws(VaultError) {
            try append(name)
            try append([UInt8(ascii: "=")])
            try value.withUnsafeBytes { (bytes) throws(VaultError) in try buffer.append(bytes) }
            try append([0])
        } catch {
            throw CommandFailure(error)
        }
        environmentEntries.append((start..<buffer.count, name.count))
    }

    /// Array's withUnsafeBytes rethrows untyped errors.
    private mutating func append(_ bytes: [UInt8]) throws(VaultError) {
        try bytes.withUnsafeBytes { raw in Result { () throws(VaultError) in try buffer.append(raw) } }.get()
    }

    /// Adds a file named as its item.
    mutating func addFile(_ name: ItemName, _ content: borrowing SecureBuffer) throws(CommandFailure) {
        guard !files.contains(where: { $0.name == name }) else {
            throw CommandFailure(message: "\(name): two secrets would make this file", status: .invalidInput)
        }
        let start = buffer.count
        do throws(VaultError) {
            try content.withUnsafeBytes { (bytes) throws(VaultError) in try buffer.append(bytes) }
        } catch {
            throw CommandFailure(error)
        }
        files.append((name, start..<buffer.count))
    }

    /// Whether one of ours sets the variable `name` (bytes before any '=').
    func hasVariable(named name: some Collection<UInt8>) -> Bool {
        buffer.withUnsafeBytes { bytes in
            environmentEntries.contains { entry in
                entry.nameLength == name.count && bytes[entry.range.lowerBound..<entry.range.lowerBound + entry.nameLength].elementsEqual(name)
            }
        }
    }

    /// Runs `body` with pointers to our environment strings, in the buffer.
    func withEnvironment<R>(_ body: ([UnsafeMutablePointer<CChar>]) -> R) -> R {
        buffer.withUnsafeBytes { bytes in
            let base = UnsafeMutableRawPointer(mutating: bytes.baseAddress)
            return body(environmentEntries.compactMap { base?.advanced(by: $0.range.lowerBound).assumingMemoryBound(to: CChar.self) })
        }
    }

    /// The values and files' contents, copied to locked memory of their own, to be masked in
    /// the command's output; nil when none is long enough to be.
    func outputMask() throws(VaultError) -> OutputMask? {
        let values = environmentEntries.map { $0.range.lowerBound + $0.nameLength + 1..<$0.range.upperBound - 1 } + files.map(\.range)
        var copy = try SecureBuffer(capacity: buffer.count)
        try buffer.withUnsafeBytes { (bytes) throws(VaultError) in try copy.append(bytes) }
        return OutputMask(copy, ranges: values)
    }

    func writeFiles(into directory: SecretsDirectory) throws(CommandFailure) {
        try buffer.withUnsafeBytes { (bytes) throws(CommandFailure) in
            for file in files { try directory.write(file.name, UnsafeRawBufferPointer(rebasing: bytes[file.range])) }
        }
    }
}
