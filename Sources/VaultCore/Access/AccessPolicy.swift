/// Every rule set of a vault, by node, and the decisions they make.
///
/// A node is governed by the nearest rule set at or above it; a node with none above it is
/// open to every process of the mounting user. Finding that rule set needs the node's
/// ancestors, which the caller knows (the mount's inode table, or the vault's storage:
/// `Vault.governingRuleSet`); a vault without rules answers without asking for any.
///
/// `decide` reads /proc only for a node that has a governing rule set, and only what its
/// principals need.
public struct AccessPolicy: Sendable {
    private let byNode: [NodeID: RuleSet]
    /// The rule sets, by node id, for listing.
    public let ruleSets: [RuleSet]

    public static let empty = AccessPolicy(ruleSets: [])

    /// Rule sets given twice for one node form one, with the rules in the order given.
    public init(ruleSets: [RuleSet]) {
        var byNode: [NodeID: RuleSet] = [:]
        for set in ruleSets {
            byNode[set.node] = RuleSet(node: set.node, rules: (byNode[set.node]?.rules ?? []) + set.rules)
        }
        self.byNode = byNode
        self.ruleSets = byNode.values.sorted { $0.node.rawValue < $1.node.rawValue }
    }

    public var hasAnyRules: Bool { !byNode.isEmpty }

    /// The rule set attached to `node` itself, if any.
    public func ruleSet(of node: NodeID) -> RuleSet? {
        byNode[node]
    }

    /// The rule set that governs `node`: its own, else the nearest of its ancestors', walking
    /// up with `parentOf` (nil: no parent known, the walk ends there) to the root.
    public func governing<E: Error>(_ node: NodeID, parentOf: (NodeID) throws(E) -> NodeID?) throws(E) -> RuleSet? {
        guard hasAnyRules else { return nil }
        var current = node
        // A cycle in what `parentOf` answers cannot loop forever: a tree is never this deep.
        for _ in 0..<100_000 {
            if let set = byNode[current] { return set }
            guard current != .root, let parent = try parentOf(current) else { return nil }
            current = parent
        }
        return nil
    }

    /// The decision for `identity` doing `access` under the rule set `set` (the governing one).
    /// Its rules that match the process are considered together: one that permits the access
    /// without confirmation allows it; else one that permits it with confirmation asks; else the
    /// process is refused (read-only, or admitted by no rule).
    public func decide(_ set: RuleSet, identity: ProcessIdentity, access: Access) -> AccessDecision {
        var files = FileIdentityCache()
        let matching = set.rules.filter { $0.principal.matches(identity, files: &files) }
        let permitting = matching.filter { $0.permits(access) }
        if permitting.contains(where: { !$0.confirm }) { return .allow }
        if let rule = permitting.first { return .confirm(rule) }
        let executable = identity.executable?.path, unit = identity.unit
        return .deny(matching.isEmpty ? .noRuleAdmits(pid: identity.pid, executable: executable, unit: unit)
                                      : .readOnly(pid: identity.pid, executable: executable, unit: unit))
    }
}
