/// Finding items by their attributes while the vault is locked, for the Secret Service: its
/// clients search first and ask to unlock only the items a search names as locked.
extension Vault {
    /// The items whose attributes include every one of `pairs`, only those directly in `parent`
    /// when it is given; by node id, ascending. Unlocked, this is `findItems`, every answer
    /// authenticated. Locked since an unlock, the answers are candidates: their stored search
    /// tags match, but their sealed names and values, and their nodes' rows, cannot be
    /// checked without the keys the lock wiped, so a row forged into the file could add one.
    /// That gives a caller no more than an item's id: reading anything of it still needs an
    /// unlock, after which `findItems` answers. Locked by an unmount, or opened locked and not
    /// yet unlocked, there is no search key: `.locked`. No pair: `.invalidArgument` (listing
    /// every item is the caller's, and needs no search).
    public func findLockedItems(_ pairs: [Attribute], in parent: NodeID?) throws(VaultError) -> [NodeID] {
        guard !pairs.isEmpty else { throw .invalidArgument("a search needs at least one attribute") }
        return try searching(unlocked: { (store) throws(VaultError) -> [NodeID] in
            try Vault.findItems(pairs, in: parent, store)
        }, locked: { (storage, key) throws(VaultError) -> [NodeID] in
            try storage.itemCandidates(holdingEvery: pairs.map { key.tag(name: $0.name, value: $0.value) }, in: parent)
        })
    }
}
