/// The name of an item or dictionary: UTF-8, 1-255 bytes, no `/` or NUL, not `.` or `..`.
public struct ItemName: Hashable, Sendable, CustomStringConvertible {
    public static let maximumBytes = 255
    public let bytes: [UInt8]

    public init<Bytes: Collection<UInt8>>(bytes: Bytes) throws(VaultError) {
        let bytes = Array(bytes)
        let shown = String(decoding: bytes.prefix(40), as: UTF8.self)
        guard !bytes.isEmpty else { throw .invalidName("a name cannot be empty") }
        guard bytes.count <= ItemName.maximumBytes else {
            throw .nameTooLong("\"\(shown)…\" is \(bytes.count) bytes; names are at most \(ItemName.maximumBytes) bytes")
        }
        guard !bytes.contains(0x2F) else { throw .invalidName("\"\(shown)\" contains '/'") }
        guard !bytes.contains(0) else { throw .invalidName("a name cannot contain a NUL byte") }
        guard bytes != [0x2E], bytes != [0x2E, 0x2E] else { throw .invalidName("\"\(shown)\" is reserved") }
        guard String(validating: bytes, as: UTF8.self) != nil else {
            throw .invalidName("\"\(shown)\" is not valid UTF-8")
        }
        self.bytes = bytes
    }

    public init(_ string: String) throws(VaultError) {
        try self.init(bytes: Array(string.utf8))
    }

    public var description: String { String(decoding: bytes, as: UTF8.self) }
}

/// A slash-separated path from the vault's root, such as `app/token`. Empty components
/// (leading, trailing or doubled slashes) are ignored; the empty path is the root.
public struct VaultPath: Hashable, Sendable, CustomStringConvertible {
    public let components: [ItemName]

    public init(_ string: String) throws(VaultError) {
        var components: [ItemName] = []
        for part in string.utf8.split(separator: 0x2F, omittingEmptySubsequences: true) {
            components.append(try ItemName(bytes: part))
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
