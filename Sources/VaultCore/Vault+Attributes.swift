/// A node's own attributes (in the mount, its `user.` extended attributes): by node id for the
/// filesystem, whose errors name nodes by number only, and by path for the command line. Each
/// call is one transaction; a change also sets the node's change time, as setxattr does.
extension Vault {
    /// Linux's own limit on an xattr name (XATTR_NAME_MAX, without the `user.` prefix here).
    public static let maximumAttributeNameBytes = AttributeName.maximumBytes
    /// Linux's limit on one value (XATTR_SIZE_MAX).
    public static let maximumAttributeValueBytes = 64 << 10
    /// A node's attributes, names and values counted together: what one node may hold.
    public static let maximumAttributeBytesPerNode = VaultFormat.maximumAttributeBytesPerNode

    // MARK: by node

    /// The node's attribute names, sorted.
    public func attributeNames(of id: NodeID) throws(VaultError) -> [AttributeName] {
        try reading { (store) throws(VaultError) in try store.attributeNames(of: try store.existingRecord(id)) }
    }

    /// Every attribute of the node with its value, sorted by name, in one snapshot.
    public func attributes(of id: NodeID) throws(VaultError) -> [Attribute] {
        try reading { (store) throws(VaultError) in try store.attributes(of: try store.existingRecord(id)) }
    }

    /// Replaces every attribute of the node at once (a name given twice is an error), within
    /// the limits: over one, the old attributes stay.
    public func replaceAttributes(of id: NodeID, with attributes: [Attribute]) throws(VaultError) {
        try writing { (store) throws(VaultError) in
            let record = try store.existingRecord(id)
            try store.changeAttributes(of: record, set: attributes, replacingUserAttributes: true)
            _ = try store.attributesChanged(of: record, at: .now())
        }
    }

    /// One value, in locked memory.
    public func attribute(_ name: AttributeName, of id: NodeID) throws(VaultError) -> SecureBuffer {
        try reading { (store) throws(VaultError) -> SecureBuffer in try Vault.attribute(name, of: try store.existingRecord(id), in: store) }
    }

    /// `durable` false leaves the commit's sync to the caller (the mount's `CommitFlusher`).
    public func setAttribute(_ name: AttributeName, to value: borrowing SecureBuffer, of id: NodeID,
                             mode: AttributeSetMode = .createOrReplace, durable: Bool = true) throws(VaultError) {
        try writing(durable: durable) { (store) throws(VaultError) in
            let record = try store.existingRecord(id)
            try store.putAttribute(name, value, on: record, mode: mode)
            _ = try store.attributesChanged(of: record, at: .now())
        }
    }

    public func removeAttribute(_ name: AttributeName, of id: NodeID, durable: Bool = true) throws(VaultError) {
        try writing(durable: durable) { (store) throws(VaultError) in
            let record = try store.existingRecord(id)
            try store.deleteAttribute(name, of: record)
            _ = try store.attributesChanged(of: record, at: .now())
        }
    }

    private static func attribute(_ name: AttributeName, of record: NodeRecord, in store: NodeStore) throws(VaultError) -> SecureBuffer {
        guard let value = try store.attributeValue(name, of: record) else {
            throw .noSuchAttribute(store.describe(name, of: record.id))
        }
        return value
    }

    // MARK: by path

    /// Every attribute of the item or dictionary at `path`, sorted by name.
    public func attributes(at path: VaultPath) throws(VaultError) -> [Attribute] {
        try reading(naming: .paths) { (store) throws(VaultError) in try store.attributes(of: try resolve(path, in: store)) }
    }

    public func attribute(_ name: AttributeName, at path: VaultPath) throws(VaultError) -> SecureBuffer {
        try reading(naming: .paths) { (store) throws(VaultError) -> SecureBuffer in
            try Vault.attribute(name, of: try resolve(path, in: store), in: store)
        }
    }

    public func setAttribute(_ name: AttributeName, to value: borrowing SecureBuffer, at path: VaultPath,
                             mode: AttributeSetMode = .createOrReplace) throws(VaultError) {
        try writing(naming: .paths) { (store) throws(VaultError) in
            let record = try resolve(path, in: store)
            try store.putAttribute(name, value, on: record, mode: mode)
            _ = try store.attributesChanged(of: record, at: .now())
        }
    }

    public func removeAttribute(_ name: AttributeName, at path: VaultPath) throws(VaultError) {
        try writing(naming: .paths) { (store) throws(VaultError) in
            let record = try resolve(path, in: store)
            try store.deleteAttribute(name, of: record)
            _ = try store.attributesChanged(of: record, at: .now())
        }
    }

    // MARK: search

    /// The paths of the items whose attributes include every one of `pairs` (names and values
    /// equal byte for byte), sorted. One indexed query on the first pair's search tag; each
    /// candidate is then authenticated and checked against every pair.
    public func find(_ pairs: [Attribute]) throws(VaultError) -> [VaultPath] {
        try reading(naming: .paths) { (store) throws(VaultError) -> [VaultPath] in
            var known: [NodeID: VaultPath] = [:]
            var paths: [VaultPath] = []
            for record in try store.items(matching: pairs) { paths.append(try store.path(of: record.id, known: &known)) }
            return paths.sorted { $0.components.lexicographicallyPrecedes($1.components) }
        }
    }

    /// The items whose attributes include every one of `pairs` (none: every item), only those
    /// directly in `parent` when it is given; by node id, ascending. A search is the indexed
    /// query `find` makes.
    public func findItems(_ pairs: [Attribute], in parent: NodeID?) throws(VaultError) -> [NodeID] {
        try reading { (store) throws(VaultError) -> [NodeID] in try Vault.findItems(pairs, in: parent, store) }
    }

    /// `findItems` inside a transaction the caller opened.
    static func findItems(_ pairs: [Attribute], in parent: NodeID?, _ store: NodeStore) throws(VaultError) -> [NodeID] {
        let records: [NodeRecord]
        switch (pairs.isEmpty, parent) {
        case (false, _): records = try store.items(matching: pairs)
        case (true, let parent?): records = try store.children(of: try store.dictionary(parent)).map(\.record)
        case (true, nil): records = try store.everyItem()
        }
        if let parent, !pairs.isEmpty { _ = try store.dictionary(parent) }
        return records.filter { $0.kind == .item && (parent == nil || $0.parent == parent) }
            .map(\.id).sorted { $0.rawValue < $1.rawValue }
    }
}
