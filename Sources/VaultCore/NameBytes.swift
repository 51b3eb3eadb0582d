import CSodium
import Glibc

/// A name's bytes and a NUL after them, wiped and freed with the last name that holds them:
/// the one storage behind ItemName and AttributeName, and what they share (comparison,
/// hashing, access), so each of them holds only its own rules.
final class NameBytes: @unchecked Sendable {  // immutable after init
    let pointer: UnsafeMutablePointer<UInt8>
    let count: Int

    init(copying bytes: UnsafeRawBufferPointer) {
        count = bytes.count
        pointer = .allocate(capacity: count + 1)
        pointer.initialize(repeating: 0, count: count + 1)
        if let base = bytes.baseAddress { pointer.update(from: base.assumingMemoryBound(to: UInt8.self), count: count) }
    }

    deinit {
        sodium_memzero(pointer, count + 1)
        pointer.deallocate()
    }

    /// Runs `validate` on a copy of `bytes` that is wiped afterwards (a Swift array, from a
    /// String or another collection, would otherwise linger in freed memory).
    static func withWipedCopy<R>(of bytes: some Collection<UInt8>,
                                 _ validate: (UnsafeRawBufferPointer) throws(VaultError) -> R) throws(VaultError) -> R {
        var copy = Array(bytes)
        defer { wipe(&copy) }
        let outcome = copy.withUnsafeBytes { raw in Result<R, VaultError> { () throws(VaultError) -> R in try validate(raw) } }
        return try outcome.get()
    }

    func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    func withCString<R>(_ body: (UnsafePointer<CChar>, Int) -> R) -> R {
        pointer.withMemoryRebound(to: CChar.self, capacity: count + 1) { body($0, count) }
    }

    func isEqual(to other: NameBytes) -> Bool {
        count == other.count && memcmp(pointer, other.pointer, count) == 0
    }

    func precedes(_ other: NameBytes) -> Bool {
        let common = memcmp(pointer, other.pointer, min(count, other.count))
        return common != 0 ? common < 0 : count < other.count
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(bytes: UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// For the command line's output and messages only: a String cannot be wiped.
    var text: String { withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }

    /// Decodes without building a String, which could not be wiped.
    static func isValidUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }
}
