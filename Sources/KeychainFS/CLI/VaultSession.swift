import Daemon
import VaultCore

/// What the everyday commands (`get`, `ls`, `find`, `attr`, `label`, `class`, `set`, `rm`, `mv`,
/// `mkdir`, `rules`, `log`, `export`) do with a vault, written once for both ways of reaching
/// it: the daemon that holds it unlocked (DaemonSession: no passphrase, and the access rules
/// judge this process) or the vault file opened with the passphrase (Vault).
protocol VaultSession {
    func itemSizeLimit() throws(VaultError) -> Int
    func read(_ path: VaultPath) throws(VaultError) -> SecureBuffer
    func list(_ path: VaultPath, details: Bool) throws(VaultError) -> [EntrySummary]
    func summary(at path: VaultPath) throws(VaultError) -> (node: NodeSummary, effectiveDefaultClass: AccessibilityClass?)
    func attributes(at path: VaultPath) throws(VaultError) -> [Attribute]
    func attribute(_ name: AttributeName, at path: VaultPath) throws(VaultError) -> SecureBuffer
    func setAttribute(_ name: AttributeName, to value: borrowing SecureBuffer, at path: VaultPath) throws(VaultError)
    func removeAttribute(_ name: AttributeName, at path: VaultPath) throws(VaultError)
    func label(at path: VaultPath) throws(VaultError) -> SecureBuffer?
    func setLabel(_ label: borrowing SecureBuffer?, at path: VaultPath) throws(VaultError)
    func find(_ pairs: [Attribute], withAttributes: Bool) throws(VaultError) -> [(path: VaultPath, attributes: [Attribute])]
    func store(_ content: borrowing SecureBuffer, at path: VaultPath, attributes: [Attribute]) throws(VaultError)
    func remove(_ path: VaultPath, recursive: Bool) throws(VaultError)
    func move(_ source: VaultPath, to destination: VaultPath) throws(VaultError)
    func createDictionary(at path: VaultPath, withIntermediates: Bool) throws(VaultError)
    func ruleSummaries(at path: VaultPath) throws(VaultError) -> [(path: VaultPath, rules: [RuleSummary])]
    func accessLog(since: Int64?, afterSequence: Int64?) throws(VaultError) -> AccessLogReading
    func exportEntries(excluding: Set<AccessibilityClass>, _ body: (PortableEntry, _ total: Int?) throws(VaultError) -> Void) throws(VaultError) -> Int
    /// After a read or change done: a vault opened here with its key logs it in a team vault's
    /// log (`Vault.recordInTeamLog`); a daemon logged it already, as it judged it.
    func logged(_ access: LoggedAccess, at path: VaultPath) throws(VaultError)
}

extension DaemonSession: VaultSession {
    func logged(_ access: LoggedAccess, at path: VaultPath) throws(VaultError) {}

    func summary(at path: VaultPath) throws(VaultError) -> (node: NodeSummary, effectiveDefaultClass: AccessibilityClass?) {
        try node(at: path)
    }

    func createDictionary(at path: VaultPath, withIntermediates: Bool) throws(VaultError) {
        try makeDictionary(at: path, withIntermediates: withIntermediates)
    }

    /// The daemon streams the entries without counting them first.
    func exportEntries(excluding: Set<AccessibilityClass>, _ body: (PortableEntry, _ total: Int?) throws(VaultError) -> Void) throws(VaultError) -> Int {
        try exportEntries(excluding: excluding) { (entry) throws(VaultError) in try body(entry, nil) }
    }
}
