/// Identifies a node for as long as it exists; the FUSE driver uses it as the inode number.
public struct NodeID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int64
    public init(_ rawValue: Int64) { self.rawValue = rawValue }
    /// The root dictionary. 1 is also FUSE's root inode.
    public static let root = NodeID(1)
    public var description: String { "#\(rawValue)" }
}
