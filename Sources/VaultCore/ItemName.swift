/// The name of an item or dictionary: UTF-8, 1-255 bytes, no `/` or NUL, not `.` or `..`.
/// Names are secrets too: the bytes live in memory of their own, wiped when the last copy of
/// the name goes, and are reached only through `withUnsafeBytes` (the command line, which
/// prints them anyway, may ask for `description`).
public struct ItemName: Hashable, Sendable, Comparable, CustomStringConvertible {
    public static let maximumBytes = 255
    private let storage: NameBytes

    public init(bytes: some Collection<UInt8>) throws(VaultError) {
        storage = try NameBytes.withWipedCopy(of: bytes, ItemName.validated)
    }

    public init(bytes: UnsafeRawBufferPointer) throws(VaultError) {
        storage = try ItemName.validated(bytes)
    }

    public init(_ string: String) throws(VaultError) {
        storage = try NameBytes.withWipedCopy(of: string.utf8, ItemName.validated)
    }

    private static func validated(_ bytes: UnsafeRawBufferPointer) throws(VaultError) -> NameBytes {
        // The messages never quote the name: a daemon keeps no name outside wiped memory.
        guard !bytes.isEmpty else { throw .invalidName("a name cannot be empty") }
        guard bytes.count <= ItemName.maximumBytes else {
            throw .nameTooLong("a name of \(bytes.count) bytes; names are at most \(ItemName.maximumBytes) bytes")
        }
        guard !bytes.contains(0x2F) else { throw .invalidName("a name cannot contain '/'") }
        guard !bytes.contains(0) else { throw .invalidName("a name cannot contain a NUL byte") }
        guard !(bytes.count == 1 && bytes[0] == 0x2E), !(bytes.count == 2 && bytes[0] == 0x2E && bytes[1] == 0x2E) else {
            throw .invalidName("'.' and '..' are reserved")
        }
        guard NameBytes.isValidUTF8(bytes) else { throw .invalidName("a name must be valid UTF-8") }
        return NameBytes(copying: bytes)
    }

    public var count: Int { storage.count }

    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try storage.withUnsafeBytes(body)
    }

    /// The name NUL-terminated, as C APIs take it, with its length without the NUL.
    public func withCString<R>(_ body: (UnsafePointer<CChar>, Int) -> R) -> R { storage.withCString(body) }

    public static func == (a: ItemName, b: ItemName) -> Bool { a.storage.isEqual(to: b.storage) }
    public static func < (a: ItemName, b: ItemName) -> Bool { a.storage.precedes(b.storage) }
    public func hash(into hasher: inout Hasher) { storage.hash(into: &hasher) }

    /// For the command line's output and messages only: a String cannot be wiped.
    public var description: String { storage.text }
}
