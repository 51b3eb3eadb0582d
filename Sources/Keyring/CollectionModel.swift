import VaultCore

/// What the service last read of the vault's shape: the collections, their items and when
/// each last changed, and the aliases. Node numbers and times only, nothing secret, so it
/// outlives a lock: a locked vault still lists its collections and items (as locked), and a
/// change is found by comparing two of these (ChangeWatcher).
struct CollectionModel: Equatable {
    struct Collection: Equatable {
        var changed: Timestamp
        var modified: Timestamp
        /// Item → its last change (content, attributes, label).
        var items: [NodeID: Timestamp]
    }

    var collections: [NodeID: Collection] = [:]
    var aliases: [String: NodeID] = [:]

    /// Reads the vault's top level and each collection's items; fails while locked.
    static func read(_ vault: Vault) throws(VaultError) -> CollectionModel {
        var model = CollectionModel()
        for entry in try vault.entries(of: .root) where entry.node.kind == .dictionary {
            var items: [NodeID: Timestamp] = [:]
            for child in try vault.entries(of: entry.node.id) where child.node.kind == .item {
                items[child.node.id] = child.node.attributes.changed
            }
            model.collections[entry.node.id] = Collection(changed: entry.node.attributes.changed,
                                                          modified: entry.node.attributes.modified, items: items)
        }
        model.aliases = try AliasTable.read(vault).filter { model.collections[$0.value] != nil }
        return model
    }

    var sortedCollections: [NodeID] { collections.keys.sorted { $0.rawValue < $1.rawValue } }

    func sortedItems(of collection: NodeID) -> [NodeID] {
        (collections[collection]?.items.keys.sorted { $0.rawValue < $1.rawValue }) ?? []
    }

    /// The collection an item is in, by the model.
    func collection(of item: NodeID) -> NodeID? {
        collections.first { $0.value.items[item] != nil }?.key
    }
}
