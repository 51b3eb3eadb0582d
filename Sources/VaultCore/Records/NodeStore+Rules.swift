/// Access rules, each step inside a transaction the caller opened. A rule record is trusted
/// only once it opens under its node's place (so a record moved to another node fails) and the
/// MAC over every rule row matches (so a record added, deleted or put back from an earlier
/// state fails). Nothing is ever skipped: a rule that cannot be read is an integrity failure,
/// never a missing rule, since a missing rule opens what it guarded.
extension NodeStore {
    private func rulesIntegrityFailure(_ detail: String) -> VaultError {
        .integrityFailure("the access rules (\(detail))")
    }

    /// Every rule row with its node's place, the MAC over them checked. A row whose node does
    /// not exist, or a missing MAC, fails too.
    private func authenticatedRuleRows() throws(VaultError) -> [(place: RecordPlace, sealed: [UInt8])] {
        let rows = try placed(try storage.ruleRows())
        try checkRulesMAC(rows)
        return rows
    }

    /// Rule rows with their nodes' places (the incarnation, which the MAC and the records bind).
    private func placed(_ rows: [RuleRow]) throws(VaultError) -> [(place: RecordPlace, sealed: [UInt8])] {
        var placed: [(place: RecordPlace, sealed: [UInt8])] = []
        for row in rows {
            guard let node = try storage.node(row.node) else {
                throw rulesIntegrityFailure("a rule of record \(row.node.rawValue), which does not exist")
            }
            placed.append((RecordPlace(node: row.node, incarnation: node.incarnation), row.sealed))
        }
        return placed
    }

    /// From format 8 on, the rules' MAC must also be the one the vault's state binds: rules and
    /// their MAC copied together from an older copy of the vault match each other, not that.
    private func checkRulesMAC(_ rows: [(place: RecordPlace, sealed: [UInt8])]) throws(VaultError) {
        guard let stored = try storage.rulesMAC() else { throw rulesIntegrityFailure("their MAC is missing") }
        guard try cipher.rulesMACMatches(stored, rows) else {
            throw rulesIntegrityFailure("a rule was changed, added, deleted or put back outside keychainfs")
        }
        if try hasCheckableState {
            guard try checkedState().rulesMAC == stored else {
                throw rulesIntegrityFailure("they and their MAC were put back from an older copy of the vault")
            }
        }
    }

    /// Every rule set, each record opened and the whole checked (see above).
    func ruleSets() throws(VaultError) -> [RuleSet] {
        var sets: [RuleSet] = []
        for row in try authenticatedRuleRows() {
            // The node's own record too: its incarnation is only trusted once its attributes open.
            guard try record(row.place.node) != nil, let rules = try cipher.openRules(row.sealed, row.place) else {
                throw .integrityFailure(describe(row.place.node) + " (access rules)")
            }
            sets.append(RuleSet(node: row.place.node, rules: rules))
        }
        return sets
    }

    /// Replaces the rules of `record` with what `change` makes of them (none: its rule row
    /// goes) and seals the MAC again. Every rule is checked as it was first: a change never
    /// launders an earlier tampering into a MAC of ours. Returns the rules as they now are.
    @discardableResult
    func changeRules(of record: NodeRecord,
                     _ change: ([AccessRule]) throws(VaultError) -> [AccessRule]) throws(VaultError) -> [AccessRule] {
        let current = try ruleSets().first { $0.node == record.id }?.rules ?? []
        let rules = try change(current)
        if rules.isEmpty {
            try storage.deleteRule(of: record.id)
        } else {
            try storage.upsertRule(RuleRow(node: record.id, sealed: cipher.sealRules(rules, record.place)))
        }
        try resealRulesMAC()
        return rules
    }

    /// The MAC of the rule rows as they are now, every node of theirs existing.
    private func resealRulesMAC() throws(VaultError) {
        let rows = try placed(try storage.ruleRows())
        try storage.setRulesMAC(cipher.rulesMAC(rows))
    }

    /// Deletes the rules of `record` (with `subtree`, of every node below it too) before the
    /// nodes go, in their transaction; when any went, checks the rules as they were and seals
    /// the MAC of those left. One statement, and nothing more, when the subtree has none.
    func deleteRules(of record: NodeRecord, subtree: Bool) throws(VaultError) {
        let deleted = try storage.deleteRules(of: record.id, subtree: subtree)
        guard !deleted.isEmpty else { return }
        try checkRulesMAC(try placed(try storage.ruleRows() + deleted))
        try resealRulesMAC()
    }

    /// The upgrade to format 4, and a new vault: no rules, and the MAC that says so.
    func sealEmptyRules() throws(VaultError) {
        try storage.setRulesMAC(cipher.rulesMAC([]))
    }
}
