/// The name of an attribute of an item or dictionary (in the mount, the extended attribute
/// `user.NAME`; the prefix is not part of it). UTF-8, 1-255 bytes, no NUL: Linux passes xattr
/// names as NUL-terminated strings of at most 255 bytes, and UTF-8 keeps them printable by the
/// command line; any other character, `/` and `.` included, is allowed. Held like `ItemName`:
/// in memory of its own, wiped with the last copy, reached through `withUnsafeBytes`.
public struct AttributeName: Hashable, Sendable, Comparable, CustomStringConvertible {
    public static let maximumBytes = 255
    private let storage: NameBytes

    public init(bytes: some Collection<UInt8>) throws(VaultError) {
        storage = try NameBytes.withWipedCopy(of: bytes, AttributeName.validated)
    }

    public init(bytes: UnsafeRawBufferPointer) throws(VaultError) {
        storage = try AttributeName.validated(bytes)
    }

    public init(_ string: String) throws(VaultError) {
        storage = try NameBytes.withWipedCopy(of: string.utf8, AttributeName.validated)
    }

    /// A name no user attribute can have: a NUL byte, then `suffix`. What the vault keeps about
    /// a node apart from its user's attributes (`ItemProperty`) is stored under such names, so
    /// it is sealed, sized and searched as attributes are and never collides with one.
    init(reserved suffix: StaticString) {
        var bytes: [UInt8] = [0]
        suffix.withUTF8Buffer { bytes.append(contentsOf: $0) }
        storage = bytes.withUnsafeBytes { NameBytes(copying: $0) }
    }

    /// A name as the vault stores it: a user's name, or a reserved one (a NUL, then a name).
    init(stored bytes: UnsafeRawBufferPointer) throws(VaultError) {
        guard bytes.first == 0 else {
            storage = try AttributeName.validated(bytes)
            return
        }
        _ = try AttributeName.validated(UnsafeRawBufferPointer(rebasing: bytes.dropFirst()))
        storage = NameBytes(copying: bytes)
    }

    /// Whether this is a reserved name, which listings of a node's attributes leave out.
    var isReserved: Bool { storage.withUnsafeBytes { $0.first == 0 } }

    private static func validated(_ bytes: UnsafeRawBufferPointer) throws(VaultError) -> NameBytes {
        // As with item names, the messages never quote the name.
        guard !bytes.isEmpty else { throw .invalidName("an attribute name cannot be empty") }
        guard bytes.count <= AttributeName.maximumBytes else {
            throw .attributeNameTooLong("an attribute name of \(bytes.count) bytes; attribute names are at most \(AttributeName.maximumBytes) bytes")
        }
        guard !bytes.contains(0) else { throw .invalidName("an attribute name cannot contain a NUL byte") }
        guard NameBytes.isValidUTF8(bytes) else { throw .invalidName("an attribute name must be valid UTF-8") }
        return NameBytes(copying: bytes)
    }

    public var count: Int { storage.count }

    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try storage.withUnsafeBytes(body)
    }

    /// The name NUL-terminated, as C APIs (listxattr's buffer) take it, with its length without the NUL.
    public func withCString<R>(_ body: (UnsafePointer<CChar>, Int) -> R) -> R { storage.withCString(body) }

    public static func == (a: AttributeName, b: AttributeName) -> Bool { a.storage.isEqual(to: b.storage) }
    public static func < (a: AttributeName, b: AttributeName) -> Bool { a.storage.precedes(b.storage) }
    public func hash(into hasher: inout Hasher) { storage.hash(into: &hasher) }

    /// For the command line's output and messages only: a String cannot be wiped. A reserved
    /// name (only `verify` may print one) shows in brackets, without its NUL.
    public var description: String {
        guard isReserved else { return storage.text }
        return storage.withUnsafeBytes { "[" + String(decoding: $0.dropFirst(), as: UTF8.self) + "]" }
    }
}
