import Glibc

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
    /// An item's accessibility class (when-unlocked for dictionaries and older records).
    public internal(set) var accessibility: AccessibilityClass = .whenUnlocked
    /// A dictionary's class for items created below it (the nearest one up the path decides);
    /// nil when it has none. Always nil for items.
    public internal(set) var defaultClass: AccessibilityClass? = nil

    /// Changes with every stored content: tells whether an item changed between two reads.
    public var contentVersion: UInt64 { contentGeneration }

    /// The plaintext layouts of the record, named by its first byte. Only `readable` ones are
    /// read outside an upgrade, so a layout 1 record put back in place of a newer one fails to
    /// open. Layout 2 stays readable (as when-unlocked, no default class): format 4 added the
    /// class without sealing every record again. An older layout 2 record of the same node put
    /// back can therefore take a class away; its content then fails to open (the class is bound
    /// into the content's associated data), as any older record mixed with newer ones does.
    enum Layout: UInt8 {
        /// Format 1: kind, mode, size, generation, mtime, ctime.
        case v1 = 1
        /// Format 2: layout 1, then atime and the number of subdictionaries.
        case v2 = 2
        /// Format 4: layout 2, then the accessibility class and a dictionary's default class
        /// (0 for none, else the class plus one). Sealed under a key of its own.
        case v3 = 3

        static let current = Layout.v3
        static let readable: [Layout] = [.v3, .v2]

        var encodedCount: Int {
            switch self {
            case .v1: return 48
            case .v2: return 68
            case .v3: return 70
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
        out[68] = accessibility.rawValue
        out[69] = defaultClass.map { $0.rawValue + 1 } ?? 0
        return out
    }

    /// A new node's attributes: accessed, modified and changed all `time`.
    init(kind: NodeKind, mode: UInt32, size: Int, at time: Timestamp, contentGeneration: UInt64,
         accessibility: AccessibilityClass = .whenUnlocked) {
        self.accessibility = accessibility
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
        case .v2, .v3:
            accessed = Timestamp(seconds: Int64(bitPattern: bytes.load(at: 48, width: 8)),
                                 nanoseconds: UInt32(truncatingIfNeeded: bytes.load(at: 56, width: 4)))
            let subdictionaries = bytes.load(at: 60, width: 8)
            guard subdictionaries <= UInt64(Int.max) else { return nil }
            self.subdictionaries = Int(subdictionaries)
        }
        if layout == .v3 {
            guard let accessibility = AccessibilityClass(rawValue: bytes[68]) else { return nil }
            self.accessibility = accessibility
            if bytes[69] != 0 {
                guard let defaultClass = AccessibilityClass(rawValue: bytes[69] - 1) else { return nil }
                self.defaultClass = defaultClass
            }
            // Classes belong to items, defaults to dictionaries.
            guard kind == .item ? defaultClass == nil : accessibility == .whenUnlocked else { return nil }
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
