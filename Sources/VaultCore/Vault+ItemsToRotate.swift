/// The list of secrets to change after a member leaves.
extension Vault {
    /// Every item of the vault with `member`'s newest read of it from the team log and whether
    /// it changed since their removal. Every item, not only those the log shows them reading:
    /// access rules admit programs on one machine, not members, and a member held the vault's
    /// key, with which they could read any record straight from the server, unlogged. What the
    /// log adds is which ones they are known to have read, and when.
    public func itemsToRotate(after member: String) throws(VaultError) -> RotationList {
        let log = try accessLog()
        let removed = log.entries.last { $0.access == .memberRemoval && $0.aboutMember == member }?.time
        var lastRead: [VaultPath: Timestamp] = [:]
        for entry in log.entries where entry.member?.name == member && entry.access == .read && !entry.decision.isDenial {
            guard let path = entry.path else { continue }
            lastRead[path] = max(lastRead[path] ?? entry.time, entry.time)
        }
        // In the order of their paths (`tree`).
        let items = try reading(naming: .paths) { (store) throws(VaultError) -> [ItemToRotate] in
            try store.tree().filter { $0.record.kind == .item }.map { path, record in
                let modified = record.attributes.modified
                return ItemToRotate(path: path, lastRead: lastRead[path], modified: modified,
                                    changedSinceRemoval: removed.map { modified > $0 } ?? false)
            }
        }
        return RotationList(member: member, removed: removed, items: items, problems: log.problems)
    }
}
