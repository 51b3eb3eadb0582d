import VaultCore

/// What the command line shows of a node's metadata (what `stat` shows through the mount).
package struct NodeSummary: Sendable {
    package let kind: NodeKind
    package let size: Int
    package let modified: Timestamp
    /// An item's class.
    package let accessibility: AccessibilityClass
    /// A dictionary's own default class.
    package let defaultClass: AccessibilityClass?

    package init(_ node: Node) {
        kind = node.kind
        size = node.attributes.size
        modified = node.attributes.modified
        accessibility = node.attributes.accessibility
        defaultClass = node.attributes.defaultClass
    }

    init(kind: NodeKind, size: Int, modified: Timestamp, accessibility: AccessibilityClass, defaultClass: AccessibilityClass?) {
        self.kind = kind
        self.size = size
        self.modified = modified
        self.accessibility = accessibility
        self.defaultClass = defaultClass
    }

    func write(to writer: inout ControlWriter) throws(VaultError) {
        try writer.integer(kind == .item ? UInt8(1) : UInt8(2))
        try writer.integer(Int64(size))
        try writer.timestamp(modified)
        try writer.accessibility(accessibility)
        try writer.accessibility(defaultClass)
    }

    static func read(from reader: inout ControlReader) throws(VaultError) -> NodeSummary {
        let kind: NodeKind = switch try reader.integer(UInt8.self) {
        case 1: .item
        case 2: .dictionary
        default: throw ControlReader.malformed("an unknown kind")
        }
        let size = Int(try reader.integer(Int64.self))
        let modified = try reader.timestamp()
        guard let accessibility = try reader.accessibility() else { throw ControlReader.malformed("an item without a class") }
        return NodeSummary(kind: kind, size: size, modified: modified, accessibility: accessibility,
                           defaultClass: try reader.accessibility())
    }
}
