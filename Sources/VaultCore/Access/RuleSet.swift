/// The rules attached to one node (an item or a dictionary). It governs that node and, for a
/// dictionary, everything below it, up to the next rule set further down: the nearest rule set
/// decides alone, nothing is merged from the ones above it. A rule set without rules admits no
/// process. Bound to the node, not to a path: a rename carries the rules along, as it carries
/// the node's attributes.
public struct RuleSet: Hashable, Sendable {
    public let node: NodeID
    public let rules: [AccessRule]

    public init(node: NodeID, rules: [AccessRule]) {
        self.node = node
        self.rules = rules
    }
}
