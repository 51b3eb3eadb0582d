import Glibc

/// Identifies a node for as long as it exists; the FUSE driver uses it as the inode number.
public struct NodeID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int64
    public init(_ rawValue: Int64) { self.rawValue = rawValue }
    /// The root dictionary. 1 is also FUSE's root inode.
    public static let root = NodeID(1)
    public var description: String { "#\(rawValue)" }
}

public enum NodeKind: Int64, Sendable {
    case dictionary = 1
    case item = 2
}

public struct Timestamp: Sendable, Equatable, Comparable {
    public var seconds: Int64
    public var nanoseconds: UInt32

    public init(seconds: Int64, nanoseconds: UInt32) {
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    public static func now() -> Timestamp {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Timestamp(seconds: Int64(ts.tv_sec), nanoseconds: UInt32(ts.tv_nsec))
    }

    public static func < (a: Timestamp, b: Timestamp) -> Bool {
        (a.seconds, a.nanoseconds) < (b.seconds, b.nanoseconds)
    }
}

/// What `stat` shows of a node. Stored encrypted beside the content so that attributes can be
/// read and changed without decrypting or rewriting the content.
public struct NodeAttributes: Sendable, Equatable {
    public var kind: NodeKind
    /// Permission bits only (07777).
    public var mode: UInt32
    /// Exact content length; 0 for dictionaries.
    public var size: Int
    public var modified: Timestamp
    public var changed: Timestamp
    /// Incremented on every content write and bound into the content's associated data, so
    /// an older content ciphertext cannot be paired with newer attributes.
    var contentGeneration: UInt64

    /// Changes with every stored content: tells whether an item changed between two reads.
    public var contentVersion: UInt64 { contentGeneration }

    static let encodedCount = 48

    func encoded() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: NodeAttributes.encodedCount)
        out[0] = 1  // layout version of this record
        out[1] = UInt8(kind.rawValue)
        out.store(UInt64(mode), at: 4, width: 4)
        out.store(UInt64(size), at: 8, width: 8)
        out.store(contentGeneration, at: 16, width: 8)
        out.store(UInt64(bitPattern: modified.seconds), at: 24, width: 8)
        out.store(UInt64(modified.nanoseconds), at: 32, width: 4)
        out.store(UInt64(bitPattern: changed.seconds), at: 36, width: 8)
        out.store(UInt64(changed.nanoseconds), at: 44, width: 4)
        return out
    }

    init(kind: NodeKind, mode: UInt32, size: Int, modified: Timestamp, changed: Timestamp, contentGeneration: UInt64) {
        self.kind = kind
        self.mode = mode
        self.size = size
        self.modified = modified
        self.changed = changed
        self.contentGeneration = contentGeneration
    }

    init?(decoding bytes: UnsafeRawBufferPointer) {
        guard bytes.count == NodeAttributes.encodedCount, bytes[0] == 1,
              let kind = NodeKind(rawValue: Int64(bytes[1])) else { return nil }
        self.kind = kind
        mode = UInt32(bytes.load(at: 4, width: 4)) & 0o7777
        let size = bytes.load(at: 8, width: 8)
        guard size <= UInt64(Int.max) else { return nil }
        self.size = Int(size)
        contentGeneration = bytes.load(at: 16, width: 8)
        modified = Timestamp(seconds: Int64(bitPattern: bytes.load(at: 24, width: 8)),
                             nanoseconds: UInt32(truncatingIfNeeded: bytes.load(at: 32, width: 4)))
        changed = Timestamp(seconds: Int64(bitPattern: bytes.load(at: 36, width: 8)),
                            nanoseconds: UInt32(truncatingIfNeeded: bytes.load(at: 44, width: 4)))
    }
}

/// A node as the filesystem and the CLI see it.
public struct Node: Sendable, Equatable {
    public let id: NodeID
    public let parent: NodeID
    public var attributes: NodeAttributes
    public var kind: NodeKind { attributes.kind }
}

public struct DirectoryEntry: Sendable {
    public let name: ItemName
    public let node: Node
}

extension Array where Element == UInt8 {
    /// Little-endian store of the low `width` bytes of `value`.
    mutating func store(_ value: UInt64, at offset: Int, width: Int) {
        for i in 0..<width { self[offset + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(i))) }
    }

    mutating func appendLittleEndian(_ value: UInt64, width: Int = 8) {
        for i in 0..<width { append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
    }
}

extension UnsafeRawBufferPointer {
    /// Little-endian load of `width` bytes.
    func load(at offset: Int, width: Int) -> UInt64 {
        var value: UInt64 = 0
        for i in 0..<width { value |= UInt64(self[offset + i]) << (8 * UInt64(i)) }
        return value
    }
}
