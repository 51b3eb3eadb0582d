/// An item's content block by block, for the mount (`ItemContent`): an open reads the item's
/// row and its first blocks, a read loads what it needs, a close stores what changed.
extension Vault {
    /// The blocks an open reads along with the map: what a small read at the start needs (all of
    /// them in a shared vault, `VaultStorage.isShared`).
    static let blocksReadAtOpen = 4

    public struct OpenedItem {
        public let node: Node
        public let content: ItemContent
    }

    /// While locked: after-first-unlock items only.
    public func openItem(_ id: NodeID) throws(VaultError) -> OpenedItem {
        try withStore(whileLocked: true) { (store) throws(VaultError) -> OpenedItem in
            // One statement for a small item; a read transaction for a large one, whose first
            // blocks must be of the version its row names.
            guard let (row, sealed) = try store.storage.nodeAndContent(id) else { throw .notFound(store.describe(id)) }
            let record = try store.authenticate(row).0
            guard record.kind == .item else { throw .isADictionary(store.describe(id)) }
            guard NodeStore.isBlocked(record.attributes.size) else {
                let whole = try store.content(of: record, sealed: sealed)
                return OpenedItem(node: record.node, content: try ItemContent(id: id, whole: whole, version: record.attributes.contentVersion))
            }
            // A shared vault's item is read whole: another machine may delete its blocks while it is open.
            let preload = store.storage.isShared ? Int(Int64.max) : Vault.blocksReadAtOpen
            return try store.storage.read { () throws(VaultError) -> OpenedItem in
                guard let (row, sealed, rows) = try store.storage.nodeAndContent(id, blocks: 0..<preload) else {
                    throw .notFound(store.describe(id))
                }
                let record = try store.authenticate(row).0
                guard record.kind == .item else { throw .isADictionary(store.describe(id)) }
                guard let map = try store.blockMap(of: record, sealed: sealed) else {
                    // Small again, or a format 8 record of a large item: whole.
                    let whole = try store.wholeContent(of: record, sealed: sealed)
                    return OpenedItem(node: record.node, content: try ItemContent(id: id, whole: whole, version: record.attributes.contentVersion))
                }
                let content = ItemContent(id: id, size: record.attributes.size, version: record.attributes.contentVersion, map: map)
                try store.openBlocks(rows, wanted: 0..<min(preload, map.generations.count), of: record, map: map) {
                    content.received($0, $1)
                }
                return OpenedItem(node: record.node, content: content)
            }
        }
    }

    /// Opens blocks `wanted` into `content`, from one snapshot with the item's row: stored
    /// anew since `content` read it, the item is taken again (`ItemContent.rebase`).
    func loadBlocks(_ wanted: [Int], into content: ItemContent) throws(VaultError) {
        guard let first = wanted.min(), let last = wanted.max() else { return }
        try withStore(whileLocked: true) { (store) throws(VaultError) in
            try store.storage.read { () throws(VaultError) in
                guard let (row, sealed, rows) = try store.storage.nodeAndContent(content.id, blocks: first..<(last + 1)) else {
                    throw .notFound(store.describe(content.id))
                }
                let record = try store.authenticate(row).0
                guard record.kind == .item else { throw .isADictionary(store.describe(content.id)) }
                guard record.attributes.contentGeneration == content.version, let map = content.map else {
                    try content.rebase(onto: record, whole: try store.wholeContent(of: record, sealed: sealed))
                    return
                }
                try store.openBlocks(rows, wanted: wanted, of: record, map: map) { content.received($0, $1) }
            }
        }
    }

    /// Stores what changed in `content` in one transaction (durable unless `durable` is
    /// false: the caller syncs then); on failure the vault keeps the previous version and
    /// `content` its writes. Stored anew elsewhere since `content` read it, its writes go
    /// over that version block by block (`ItemContent.rebase`). While locked: after-first-unlock
    /// items only.
    public func storeContent(_ content: ItemContent, modified: Timestamp, changed: Timestamp?,
                             durable: Bool = true) throws(VaultError) -> Node {
        try checkItemSize(content.count)
        try content.prepareToStore(from: self)
        let (node, map) = try writing(durable: durable, whileLocked: true) { (store) throws(VaultError) -> (Node, BlockMap?) in
            let record = try store.existingRecord(content.id)
            guard record.kind == .item else { throw .isADictionary(store.describe(content.id)) }
            if record.attributes.contentGeneration != content.version {
                try content.rebase(onto: record, whole: try store.content(of: record))
            }
            var map: BlockMap? = nil
            let attributes = try store.writeContent(count: content.count, of: record, modified: modified, changed: changed) {
                (place, generation) throws(VaultError) -> [UInt8] in
                let sealed = try content.seal(store, place, generation: generation, accessibility: record.attributes.accessibility)
                map = sealed.map
                return sealed.sealed
            }
            return (Node(id: content.id, parent: record.parent, attributes: attributes), map)
        }
        content.didStore(generation: node.attributes.contentGeneration, map: map)
        return node
    }

    /// truncate(2) of an item no descriptor holds: reads at most the block cut in two.
    public func truncateItem(_ id: NodeID, to size: Int, durable: Bool = true) throws(VaultError) -> Node {
        try checkItemSize(size)
        let opened = try openItem(id)
        defer { opened.content.wipe() }
        try opened.content.resize(from: self, to: size)
        return try storeContent(opened.content, modified: .now(), changed: nil, durable: durable)
    }
}
