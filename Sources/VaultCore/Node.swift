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

    public init(_ time: timespec) {
        self.init(seconds: Int64(time.tv_sec), nanoseconds: UInt32(time.tv_nsec))
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
    /// Exact content length; for a dictionary, its number of entries.
    public var size: Int
    public var modified: Timestamp
    public var changed: Timestamp
    /// Set at creation and by `setAttributes`, never by reads (mounts are noatime) nor by
    /// content writes.
    public var accessed: Timestamp
    /// For a dictionary, how many of its entries are dictionaries (st_nlink is 2 plus this,
    /// taken from authenticated data); 0 for items.
    public internal(set) var subdictionaries: Int
    /// Incremented on every content write and bound into the content's associated data, so
    /// an older content ciphertext cannot be paired with newer attributes.
    var contentGeneration: UInt64

    /// Changes with every stored content: tells whether an item changed between two reads.
    public var contentVersion: UInt64 { contentGeneration }

    /// The plaintext layouts of the record, named by its first byte. Only `current` is read
    /// outside an upgrade, so an older record put back in place of a newer one fails to open.
    enum Layout: UInt8 {
        /// Format 1: kind, mode, size, generation, mtime, ctime.
        case v1 = 1
        /// Format 2: layout 1, then atime and the number of subdictionaries.
        case v2 = 2

        static let current = Layout.v2

        var encodedCount: Int {
            switch self {
            case .v1: return 48
            case .v2: return 68
            }
        }
    }

    func encoded() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Layout.current.encodedCount)
        out[0] = Layout.current.rawValue
        out[1] = UInt8(kind.rawValue)
        out.store(UInt64(mode), at: 4, width: 4)
        out.store(UInt64(size), at: 8, width: 8)
        out.store(contentGeneration, at: 16, width: 8)
        out.store(UInt64(bitPattern: modified.seconds), at: 24, width: 8)
        out.store(UInt64(modified.nanoseconds), at: 32, width: 4)
        out.store(UInt64(bitPattern: changed.seconds), at: 36, width: 8)
        out.store(UInt64(changed.nanoseconds), at: 44, width: 4)
        out.store(UInt64(bitPattern: accessed.seconds), at: 48, width: 8)
        out.store(UInt64(accessed.nanoseconds), at: 56, width: 4)
        out.store(UInt64(subdictionaries), at: 60, width: 8)
        return out
    }

    /// A new node's attributes: accessed, modified and changed all `time`.
    init(kind: NodeKind, mode: UInt32, size: Int, at time: Timestamp, contentGeneration: UInt64) {
        self.kind = kind
        self.mode = mode
        self.size = size
        modified = time
        changed = time
        accessed = time
        subdictionaries = 0
        self.contentGeneration = contentGeneration
    }

    /// Layout 1 has no access time and no count of subdictionaries: they read as the
    /// modification time and 0, for the upgrade to correct from the rows.
    init?(decoding bytes: UnsafeRawBufferPointer, layout: Layout) {
        guard bytes.count == layout.encodedCount, bytes[0] == layout.rawValue,
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
        switch layout {
        case .v1:
            accessed = modified
            subdictionaries = 0
        case .v2:
            accessed = Timestamp(seconds: Int64(bitPattern: bytes.load(at: 48, width: 8)),
                                 nanoseconds: UInt32(truncatingIfNeeded: bytes.load(at: 56, width: 4)))
            let subdictionaries = bytes.load(at: 60, width: 8)
            guard subdictionaries <= UInt64(Int.max) else { return nil }
            self.subdictionaries = Int(subdictionaries)
        }
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
