import Daemon
import Support
import VaultCore

/// The vault opened with the passphrase: every access is the owner's, no rule is asked.
extension Vault: VaultSession {
    func itemSizeLimit() throws(VaultError) -> Int { itemSizeLimit }

    func logged(_ access: LoggedAccess, at path: VaultPath) throws(VaultError) {
        do throws(VaultError) {
            try recordInTeamLog(access, at: path)
        } catch .offline {
            // A read from the replica: done, but the team log on the server cannot hear of it.
            Terminal.printInfo("offline: this \(access) of \(path) is not recorded in the team log")
        }
    }

    func list(_ path: VaultPath, details: Bool) throws(VaultError) -> [EntrySummary] {
        try list(path).map { (entry) throws(VaultError) in
            let summary = NodeSummary(entry.node)
            guard details else { return EntrySummary(name: entry.name, node: summary) }
            return EntrySummary(name: entry.name, node: summary, attributes: try attributes(of: entry.node.id),
                                label: try property(.label, of: entry.node.id))
        }
    }

    func summary(at path: VaultPath) throws(VaultError) -> (node: NodeSummary, effectiveDefaultClass: AccessibilityClass?) {
        let node: Node = try node(at: path)
        return (NodeSummary(node), node.kind == .dictionary ? try effectiveDefaultClass(at: path) : nil)
    }

    func setAttribute(_ name: AttributeName, to value: borrowing SecureBuffer, at path: VaultPath) throws(VaultError) {
        try setAttribute(name, to: value, at: path, mode: .createOrReplace)
    }

    func label(at path: VaultPath) throws(VaultError) -> SecureBuffer? { try property(.label, at: path) }

    func setLabel(_ label: borrowing SecureBuffer?, at path: VaultPath) throws(VaultError) {
        try setProperty(.label, to: label, at: path)
    }

    func find(_ pairs: [Attribute], withAttributes: Bool) throws(VaultError) -> [(path: VaultPath, attributes: [Attribute])] {
        try find(pairs).map { (path) throws(VaultError) in (path, withAttributes ? try attributes(at: path) : []) }
    }

    func store(_ content: borrowing SecureBuffer, at path: VaultPath, attributes: [Attribute]) throws(VaultError) {
        try store(content, at: path, attributes: attributes, accessibility: nil)
    }

    func createDictionary(at path: VaultPath, withIntermediates: Bool) throws(VaultError) {
        let _: Node = try makeDictionary(at: path, withIntermediates: withIntermediates)
    }

    func ruleSummaries(at path: VaultPath) throws(VaultError) -> [(path: VaultPath, rules: [RuleSummary])] {
        try ruleSets(at: path).map { ($0.path, $0.ruleSet.rules.map(RuleSummary.init)) }
    }

    func exportEntries(excluding: Set<AccessibilityClass>, _ body: (PortableEntry, _ total: Int?) throws(VaultError) -> Void) throws(VaultError) -> Int {
        try exportEntries(excluding: excluding) { (entry: PortableEntry, total: Int) throws(VaultError) in try body(entry, total) }
    }
}
