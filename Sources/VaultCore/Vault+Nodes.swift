/// Operations by node id: what the filesystem driver uses (node ids are its inode numbers).
extension Vault {
    /// While locked: dictionaries and after-first-unlock items only.
    public func node(_ id: NodeID) throws(VaultError) -> Node {
        try withStore(whileLocked: true) { (store) throws(VaultError) in try store.existingRecord(id).node }
    }

    /// A node's name (nil for the root).
    public func name(of id: NodeID) throws(VaultError) -> ItemName? {
        try withStore { (store) throws(VaultError) in try store.name(of: id) }
    }

    /// While locked: dictionaries and after-first-unlock items only, and a miss is `.locked`
    /// too, so a locked mount does not tell which names exist.
    public func lookup(_ name: ItemName, in parent: NodeID) throws(VaultError) -> Node {
        try withStore(whileLocked: true) { (store) throws(VaultError) in
            // One indexed query; the parent is only examined to explain a miss.
            if let record = try store.child(named: name, in: parent) { return record.node }
            if store.isLocked { throw .locked }
            _ = try store.dictionary(parent)
            // Every create begins with a lookup that misses: no path walk for its message.
            throw .notFound(store.describe(parent, appending: name))
        }
    }

    /// The path of a node from the root, its names authenticated on the way up, in one
    /// snapshot: what a confirmation dialog shows. The names stay in their own wiped memory.
    public func path(of id: NodeID) throws(VaultError) -> VaultPath {
        try reading { (store) throws(VaultError) in
            guard try store.record(id) != nil else { throw .notFound("node \(id)") }
            var known: [NodeID: VaultPath] = [:]
            return try store.path(of: id, known: &known)
        }
    }

    /// Changes whenever anything is committed to the vault, by this process or another: what
    /// tells a reader whether something it read earlier may be out of date.
    public struct ChangeStamp: Equatable, Sendable {
        let token: StorageChangeToken
    }

    /// Needs no key: a locked vault's reader may wait for a change too.
    public func changeStamp() throws(VaultError) -> ChangeStamp {
        try withStorage { (storage) throws(VaultError) in ChangeStamp(token: try storage.changeToken()) }
    }

    /// Several names looked up in one snapshot, each with its own outcome (`.notFound` where
    /// a name is not, or no longer, there): what a listing that carries attributes needs.
    public func lookup(_ names: [ItemName], in parent: NodeID) throws(VaultError) -> [Result<Node, VaultError>] {
        try reading { (store) throws(VaultError) in
            _ = try store.dictionary(parent)
            return names.map { (name) -> Result<Node, VaultError> in
                do throws(VaultError) {
                    guard let record = try store.child(named: name, in: parent) else { return .failure(.notFound(store.describe(parent, appending: name))) }
                    return .success(record.node)
                } catch {
                    return .failure(error)
                }
            }
        }
    }

    /// The entries of a dictionary, in no particular order.
    public func entries(of dictionary: NodeID) throws(VaultError) -> [DirectoryEntry] {
        try reading { (store) throws(VaultError) in
            try store.children(of: try store.dictionary(dictionary)).map { DirectoryEntry(name: $0.name, node: $0.record.node) }
        }
    }

    /// An item and its content, read together (one lock, one snapshot): what an open needs.
    public struct ItemSnapshot: ~Copyable {
        public let node: Node
        public var content: SecureBuffer

        /// Hands over the content (the snapshot ends).
        public consuming func takeContent() -> SecureBuffer { content }
    }

    /// While locked: after-first-unlock items only.
    public func item(_ id: NodeID) throws(VaultError) -> ItemSnapshot {
        // The row and its content come from one snapshot (`nodeAndContent`).
        try withStore(whileLocked: true) { (store) throws(VaultError) -> ItemSnapshot in try store.item(id) }
    }

    /// Creates an item; fails if the name is taken. `durable: false` is for a caller that will
    /// store the item again, durably, before it reports success to anyone (the mount's create,
    /// whose close follows), or make it durable within a bounded time (`syncCarriedCommits`).
    /// The same holds for `durable: false` on the namespace changes below.
    public func createItem(named name: ItemName, in parent: NodeID, content: borrowing SecureBuffer,
                           mode: UInt32 = 0o600, durable: Bool = true) throws(VaultError) -> Node {
        try checkItemSize(content.count)
        return try writing(durable: durable) { (store) throws(VaultError) -> Node in
            let dictionary = try store.dictionary(parent)
            guard try store.child(named: name, in: parent) == nil else {
                throw .alreadyExists(store.describe(parent, appending: name))
            }
            return try store.insertItem(named: name, in: dictionary, mode: mode, content: content)
        }
    }

    public func makeDictionary(named name: ItemName, in parent: NodeID, mode: UInt32 = 0o700,
                               durable: Bool = true) throws(VaultError) -> Node {
        try writing(durable: durable) { (store) throws(VaultError) -> Node in
            let dictionary = try store.dictionary(parent)
            guard try store.child(named: name, in: parent) == nil else {
                throw .alreadyExists(store.describe(parent, appending: name))
            }
            return try store.insertDictionary(named: name, in: dictionary, mode: mode)
        }
    }

    /// Replaces an item's whole content in one transaction: readers see the old or the new.
    /// While locked: after-first-unlock items only.
    /// `changed` is when the content last changed (default now); a later stored ctime (from a
    /// chmod after the writes) is kept, so ctime never moves back or jumps at the commit. The
    /// padding happens in `content` itself (its capacity may grow; its bytes and count do not
    /// change), which saves a second locked allocation per store.
    /// `durable: false`: the caller makes it durable (`syncCarriedCommits`) before it tells anyone.
    public func replaceContent(of id: NodeID, with content: inout SecureBuffer, modified: Timestamp? = nil,
                               changed: Timestamp? = nil, durable: Bool = true) throws(VaultError) -> Node {
        try checkItemSize(content.count)
        return try writing(durable: durable, whileLocked: true) { (store) throws(VaultError) -> Node in
            let record = try store.existingRecord(id)
            guard record.kind == .item else { throw .isADictionary(store.describe(id)) }
            let attributes = try store.writeContent(count: content.count, of: record, modified: modified ?? .now(),
                                                    changed: changed) { (place, generation) throws(VaultError) in
                try store.storeContent(inPlace: &content, place, generation: generation,
                                       accessibility: record.attributes.accessibility, previousSize: record.attributes.size)
            }
            return Node(id: id, parent: record.parent, attributes: attributes)
        }
    }

    /// chmod / utimens: each given value is stored, and the change time becomes now.
    public func setAttributes(of id: NodeID, mode: UInt32? = nil, modified: Timestamp? = nil,
                              accessed: Timestamp? = nil, durable: Bool = true) throws(VaultError) -> Node {
        try writing(durable: durable) { (store) throws(VaultError) -> Node in
            let record = try store.existingRecord(id)
            var attributes = record.attributes
            if let mode { attributes.mode = mode & 0o7777 }
            if let modified { attributes.modified = modified }
            if let accessed { attributes.accessed = accessed }
            attributes.changed = .now()
            try store.writeAttributes(attributes, of: record)
            return Node(id: id, parent: record.parent, attributes: attributes)
        }
    }

    /// unlink (`kind == .item`) or rmdir (`kind == .dictionary`, which must be empty).
    /// Returns the removed node.
    @discardableResult
    public func remove(named name: ItemName, in parent: NodeID, kind: NodeKind, durable: Bool = true) throws(VaultError) -> NodeID {
        try writing(durable: durable) { (store) throws(VaultError) in
            let dictionary = try store.dictionary(parent)
            guard let record = try store.child(named: name, in: parent) else {
                throw .notFound(store.describe(parent, appending: name))
            }
            try store.checkRemovable(record, as: kind, path: store.describe(parent, appending: name))
            try store.remove(record, from: dictionary, at: .now())
            return record.id
        }
    }

    /// rename(2): moves `name` in `parent` to `newName` in `newParent`, replacing an existing
    /// target of a compatible kind unless `replacing` is false. Contents are not re-encrypted.
    /// Returns the node it replaced, if any.
    @discardableResult
    public func move(_ name: ItemName, from parent: NodeID, to newName: ItemName, in newParent: NodeID,
                     replacing: Bool = true, durable: Bool = true) throws(VaultError) -> NodeID? {
        try writing(durable: durable) { (store) throws(VaultError) in
            try moveNode(store, name, from: parent, to: newName, in: newParent, replacing: replacing)
        }
    }

    @discardableResult
    func moveNode(_ store: NodeStore, _ name: ItemName, from parent: NodeID, to newName: ItemName, in newParent: NodeID,
                  replacing: Bool) throws(VaultError) -> NodeID? {
        let sourceDictionary = try store.dictionary(parent)
        let targetDictionary = newParent == parent ? sourceDictionary : try store.dictionary(newParent)
        guard let source = try store.child(named: name, in: parent) else {
            throw .notFound(store.describe(parent, appending: name))
        }
        if source.kind == .dictionary, try store.isAncestor(source.id, of: newParent) {
            throw .invalidMove("cannot move \(store.describe(source.id)) into itself")
        }
        let now = Timestamp.now()
        var replaced: NodeID? = nil
        if let target = try store.child(named: newName, in: newParent) {
            if target.id == source.id { return nil }
            let targetPath = store.describe(newParent, appending: newName)
            guard replacing else { throw .alreadyExists(targetPath) }
            try store.checkRemovable(target, as: source.kind, path: targetPath)
            try store.remove(target, from: targetDictionary, at: now)
            replaced = target.id
        }
        try store.relink(source, to: newParent, as: newName, at: now)
        if newParent != parent {
            let subdictionaries = source.kind == .dictionary ? 1 : 0
            try store.changeEntries(of: sourceDictionary, by: -1, subdictionaries: -subdictionaries, at: now)
            try store.changeEntries(of: targetDictionary, by: 1, subdictionaries: subdictionaries, at: now)
        } else {
            try store.changeEntries(of: sourceDictionary, by: 0, at: now)
        }
        return replaced
    }
}
