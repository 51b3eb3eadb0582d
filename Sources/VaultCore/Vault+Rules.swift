/// Access rules: changed by path (the command line, with the passphrase), read as a whole
/// (`accessPolicy`, which the mount loads and reloads when `rulesStamp` changes) and resolved
/// by node (`governingRuleSet`, for the mount, which knows node ids). Each call is one
/// transaction; every rule record is authenticated and the MAC over all of them checked.
extension Vault {
    /// Every rule set of the vault. Throws `.integrityFailure` when any rule record fails
    /// authentication, belongs to a node that does not exist, or the set of records is not the
    /// one last written (a record changed, added, deleted or put back): never a policy with a
    /// rule missing.
    public func accessPolicy() throws(VaultError) -> AccessPolicy {
        try reading { (store) throws(VaultError) in AccessPolicy(ruleSets: try store.ruleSets()) }
    }

    /// Adds `rule` to the rule set of the item or dictionary at `path` (creating the set); a rule
    /// there for the same executable path or unit is replaced (its flags, and for an executable
    /// the file it was made for).
    public func allow(_ rule: AccessRule, at path: VaultPath) throws(VaultError) {
        try writing(naming: .paths) { (store) throws(VaultError) in
            try store.changeRules(of: try resolve(path, in: store)) { (current) throws(VaultError) -> [AccessRule] in
                var rules = current
                if let index = rules.firstIndex(where: { $0.principal.namesSameSubject(as: rule.principal) }) {
                    rules[index] = rule
                } else {
                    rules.append(rule)
                }
                return rules
            }
            try appendAccessLog([Vault.ownChange(.ruleChange, at: path)], in: store)
        }
    }

    /// Removes the rule for `principal` (same executable path or unit) at `path`, or with nil
    /// every rule there; the rule set goes with its last rule, leaving `path` to the nearest
    /// rule set above it, or open. Returns the rules left at `path`. `.noSuchRule` when there
    /// is no such rule (nothing changes).
    @discardableResult
    public func disallow(_ principal: Principal?, at path: VaultPath) throws(VaultError) -> [AccessRule] {
        try writing(naming: .paths) { (store) throws(VaultError) -> [AccessRule] in
            let left = try store.changeRules(of: try resolve(path, in: store)) { (current) throws(VaultError) -> [AccessRule] in
                guard let principal else {
                    guard !current.isEmpty else { throw .noSuchRule(path.description) }
                    return []
                }
                let kept = current.filter { !$0.principal.namesSameSubject(as: principal) }
                guard kept.count < current.count else { throw .noSuchRule("\(path.description), \(principal)") }
                return kept
            }
            try appendAccessLog([Vault.ownChange(.ruleChange, at: path)], in: store)
            return left
        }
    }

    /// The rule sets at `path` and below it, with their paths, sorted by path: what `keychainfs
    /// rules` lists. Every node on each path is authenticated.
    public func ruleSets(at path: VaultPath = .root) throws(VaultError) -> [(path: VaultPath, ruleSet: RuleSet)] {
        try reading(naming: .paths) { (store) throws(VaultError) -> [(path: VaultPath, ruleSet: RuleSet)] in
            _ = try resolve(path, in: store)
            var known: [NodeID: VaultPath] = [:]
            var found: [(path: VaultPath, ruleSet: RuleSet)] = []
            for set in try store.ruleSets() {
                let ruled = try store.path(of: set.node, known: &known)
                if ruled.components.starts(with: path.components) { found.append((ruled, set)) }
            }
            return found.sorted { $0.path.components.lexicographicallyPrecedes($1.path.components) }
        }
    }

    /// The rule set that governs `node` under `policy`: its own, else its nearest ancestor's.
    /// Nothing is read when the policy has no rules (or `node` has its own); otherwise the
    /// parents are read in one snapshot, each link authenticated (a node's name is sealed with
    /// its parent), so a row moved in the file cannot take a node out from under its rules.
    public func governingRuleSet(of node: NodeID, in policy: AccessPolicy) throws(VaultError) -> RuleSet? {
        guard policy.hasAnyRules else { return nil }
        if let own = policy.ruleSet(of: node) { return own }
        // Also while locked with after-first-unlock keys kept: those items stay reachable, and
        // their rules still apply (the walk needs names and node attributes, which are kept).
        return try reading(whileLocked: true) { (store) throws(VaultError) -> RuleSet? in
            try policy.governing(node) { (id) throws(VaultError) -> NodeID? in
                guard let found = try store.recordAndName(id) else { throw .notFound(store.describe(id)) }
                return found.record.parent
            }
        }
    }

    /// Changes whenever the rules do, by this process or another (the MAC over every rule
    /// record, which a change always reseals): one small read, for a mount to poll, loading
    /// `accessPolicy()` again when it differs from the last one seen.
    public struct RulesStamp: Equatable, Sendable {
        let mac: [UInt8]?
    }

    /// Needs no key: a locked mount can still tell that the rules changed.
    public func rulesStamp() throws(VaultError) -> RulesStamp {
        try withStorage { (storage) throws(VaultError) in RulesStamp(mac: try storage.rulesMAC()) }
    }
}
