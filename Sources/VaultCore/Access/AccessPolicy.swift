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

    /// The decision for `identity` doing `access` under the rule set `set` (the governing one),
    /// asked through `channel`. Its rules that name the process are considered together: one
    /// that permits the access without confirmation allows it; else one that permits it with
    /// confirmation asks; else the process is refused (read-only, or admitted by no rule). A
    /// process named by a rule but open to another program's doing (`ProcessDoubt`) is refused
    /// whatever the rule says, and so is a D-Bus caller named by an executable rule without
    /// `--confirm` (see `AccessChannel.busConnection`).
    /// `clearances`: processes lately found free of the doubts an exec raises (see there).
    public func decide(_ set: RuleSet, identity: ProcessIdentity, access: Access,
                       channel: AccessChannel = .request, clearances: ProcessClearances? = nil) -> AccessDecision {
        var files = FileIdentityCache()
        var matching: [AccessRule] = []
        var secureExecution = true, executablePrincipal = false
        for rule in set.rules {
            guard let match = rule.principal.match(identity, files: &files) else { continue }
            matching.append(rule)
            if match != .setgidExecutable { secureExecution = false }
            if match != .unit { executablePrincipal = true }
        }
        // Read for a refusal's message only: the usual allowed request spares the cgroup's read.
        var executable: String? { identity.executable?.path }
        var unit: String? { identity.unit }
        guard !matching.isEmpty else { return .deny(.noRuleAdmits(pid: identity.pid, executable: executable, unit: unit)) }
        if let doubt = identity.doubt(secureExecution: secureExecution, executablePrincipal: executablePrincipal, clearances: clearances) {
            return .deny(.doubted(pid: identity.pid, executable: executable, unit: unit, doubt: doubt))
        }
        let permitting = matching.filter { $0.permits(access) }
        let vouched = permitting.filter { rule in
            if channel == .busConnection, case .executable = rule.principal { return rule.confirm }
            return true
        }
        if vouched.contains(where: { !$0.confirm }) { return .allow }
        if let rule = vouched.first { return .confirm(rule) }
        if !permitting.isEmpty { return .deny(.busCallerUnconfirmed(pid: identity.pid, executable: executable)) }
        return .deny(.readOnly(pid: identity.pid, executable: executable, unit: unit))
    }
}
