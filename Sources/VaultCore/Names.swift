import CSodium
import Glibc

/// The name of an item or dictionary: UTF-8, 1-255 bytes, no `/` or NUL, not `.` or `..`.
/// Names are secrets too: the bytes live in memory of their own, wiped when the last copy of
/// the name goes, and are reached only through `withUnsafeBytes` (the command line, which
/// prints them anyway, may ask for `description`).
public struct ItemName: Hashable, Sendable, Comparable, CustomStringConvertible {
    public static let maximumBytes = 255
    private let storage: NameBytes

    public init(bytes: some Collection<UInt8>) throws(VaultError) {
        var copy = Array(bytes)
        defer { wipe(&copy) }
        try self.init(validating: copy.withUnsafeBytes { $0 })
    }

    public init(bytes: UnsafeRawBufferPointer) throws(VaultError) {
        try self.init(validating: bytes)
    }

    private init(validating bytes: UnsafeRawBufferPointer) throws(VaultError) {
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
        guard isValidUTF8(bytes) else { throw .invalidName("a name must be valid UTF-8") }
        storage = NameBytes(copying: bytes)
    }

    public init(_ string: String) throws(VaultError) {
        var bytes = Array(string.utf8)
        defer { wipe(&bytes) }
        try self.init(validating: bytes.withUnsafeBytes { $0 })
    }

    public var count: Int { storage.count }

    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: storage.pointer, count: storage.count))
    }

    /// The name NUL-terminated, as C APIs take it, with its length without the NUL.
    public func withCString<R>(_ body: (UnsafePointer<CChar>, Int) -> R) -> R {
        storage.pointer.withMemoryRebound(to: CChar.self, capacity: storage.count + 1) { body($0, storage.count) }
    }

    public static func == (a: ItemName, b: ItemName) -> Bool {
        a.count == b.count && memcmp(a.storage.pointer, b.storage.pointer, a.count) == 0
    }

    public static func < (a: ItemName, b: ItemName) -> Bool {
        let common = memcmp(a.storage.pointer, b.storage.pointer, min(a.count, b.count))
        return common != 0 ? common < 0 : a.count < b.count
    }

    public func hash(into hasher: inout Hasher) {
        withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    /// For the command line's output and messages only: a String cannot be wiped.
    public var description: String { withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }
}

/// Decodes without building a String, which could not be wiped.
private func isValidUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
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

/// The name of an attribute of an item or dictionary (in the mount, the extended attribute
/// `user.NAME`; the prefix is not part of it). UTF-8, 1-255 bytes, no NUL: Linux passes xattr
/// names as NUL-terminated strings of at most 255 bytes, and UTF-8 keeps them printable by the
/// command line; any other character, `/` and `.` included, is allowed. Held like `ItemName`:
/// in memory of its own, wiped with the last copy, reached through `withUnsafeBytes`.
public struct AttributeName: Hashable, Sendable, Comparable, CustomStringConvertible {
    public static let maximumBytes = 255
    private let storage: NameBytes

    public init(bytes: some Collection<UInt8>) throws(VaultError) {
        var copy = Array(bytes)
        defer { wipe(&copy) }
        try self.init(validating: copy.withUnsafeBytes { $0 })
    }

    public init(bytes: UnsafeRawBufferPointer) throws(VaultError) {
        try self.init(validating: bytes)
    }

    public init(_ string: String) throws(VaultError) {
        var bytes = Array(string.utf8)
        defer { wipe(&bytes) }
        try self.init(validating: bytes.withUnsafeBytes { $0 })
    }

    private init(validating bytes: UnsafeRawBufferPointer) throws(VaultError) {
        // As with item names, the messages never quote the name.
        guard !bytes.isEmpty else { throw .invalidName("an attribute name cannot be empty") }
        guard bytes.count <= AttributeName.maximumBytes else {
            throw .attributeNameTooLong("an attribute name of \(bytes.count) bytes; attribute names are at most \(AttributeName.maximumBytes) bytes")
        }
        guard !bytes.contains(0) else { throw .invalidName("an attribute name cannot contain a NUL byte") }
        guard isValidUTF8(bytes) else { throw .invalidName("an attribute name must be valid UTF-8") }
        storage = NameBytes(copying: bytes)
    }

    public var count: Int { storage.count }

    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: storage.pointer, count: storage.count))
    }

    /// The name NUL-terminated, as C APIs (listxattr's buffer) take it, with its length without the NUL.
    public func withCString<R>(_ body: (UnsafePointer<CChar>, Int) -> R) -> R {
        storage.pointer.withMemoryRebound(to: CChar.self, capacity: storage.count + 1) { body($0, storage.count) }
    }

    public static func == (a: AttributeName, b: AttributeName) -> Bool {
        a.count == b.count && memcmp(a.storage.pointer, b.storage.pointer, a.count) == 0
    }

    public static func < (a: AttributeName, b: AttributeName) -> Bool {
        let common = memcmp(a.storage.pointer, b.storage.pointer, min(a.count, b.count))
        return common != 0 ? common < 0 : a.count < b.count
    }

    public func hash(into hasher: inout Hasher) {
        withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    /// For the command line's output and messages only: a String cannot be wiped.
    public var description: String { withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }
}

/// A name's bytes and a NUL after them, wiped and freed with the last name that holds them.
private final class NameBytes: @unchecked Sendable {  // immutable after init
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
}

/// A slash-separated path from the vault's root, such as `app/token`. Empty components
/// (leading, trailing or doubled slashes) are ignored; the empty path is the root.
public struct VaultPath: Hashable, Sendable, CustomStringConvertible {
    public let components: [ItemName]

    public init(_ string: String) throws(VaultError) {
        var components: [ItemName] = []
        for part in string.utf8.split(separator: 0x2F, omittingEmptySubsequences: true) {
            do throws(VaultError) {
                components.append(try ItemName(bytes: part))
            } catch .invalidName(let reason) {
                // The command line's own input: quoting it helps and leaks nothing new.
                throw .invalidName("\"\(String(decoding: part.prefix(40), as: UTF8.self))\": \(reason)")
            } catch .nameTooLong(let reason) {
                throw .nameTooLong("\"\(String(decoding: part.prefix(40), as: UTF8.self))…\": \(reason)")
            }
        }
        self.components = components
    }

    public init(components: [ItemName]) { self.components = components }

    public static let root = VaultPath(components: [])
    public var isRoot: Bool { components.isEmpty }
    public var parent: VaultPath { VaultPath(components: components.dropLast()) }
    public var lastComponent: ItemName? { components.last }
    public func appending(_ name: ItemName) -> VaultPath { VaultPath(components: components + [name]) }

    public var description: String {
        isRoot ? "/" : components.map(\.description).joined(separator: "/")
    }
}
