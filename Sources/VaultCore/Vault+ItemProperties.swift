/// A node's properties (`ItemProperty`: a Secret Service item's label and content type), by
/// node id for the daemon and by path for the command line, and whole Secret Service items:
/// content, user attributes and properties stored in one transaction, all or nothing.
/// A property is limited like an attribute value and counts toward the node's attribute limit;
/// a change sets the node's change time, as an attribute change does.
extension Vault {
    // MARK: by node

    /// The value, in locked memory; nil when the property is not set.
    public func property(_ property: ItemProperty, of id: NodeID) throws(VaultError) -> SecureBuffer? {
        try reading { (store) throws(VaultError) -> SecureBuffer? in
            try store.attributeValue(property.storedName, of: try store.existingRecord(id))
        }
    }

    /// Sets the property, or with nil removes it (unset already is no error). `mode` is
    /// setxattr's, for a value: `.create` fails if it is set, `.replace` if it is not.
    public func setProperty(_ property: ItemProperty, to value: borrowing SecureBuffer?, of id: NodeID,
                            mode: AttributeSetMode = .createOrReplace) throws(VaultError) {
        try writing { (store) throws(VaultError) in
            let record = try store.existingRecord(id)
            try Vault.store(property, value, on: record, mode: mode, in: store)
            _ = try store.attributesChanged(of: record, at: .now())
        }
    }

    /// The same for a value the caller keeps (an optional argument would consume it).
    /// `durable` false leaves the commit's sync to the caller (the mount's `CommitFlusher`).
    public func setProperty(_ property: ItemProperty, to value: borrowing SecureBuffer, of id: NodeID,
                            mode: AttributeSetMode = .createOrReplace, durable: Bool = true) throws(VaultError) {
        try writing(durable: durable) { (store) throws(VaultError) in
            let record = try store.existingRecord(id)
            try store.putAttribute(property.storedName, value, on: record, mode: mode)
            _ = try store.attributesChanged(of: record, at: .now())
        }
    }

    /// Removes the property; fails with `.noSuchAttribute` when it is not set, as removexattr does.
    public func removeProperty(_ property: ItemProperty, of id: NodeID, durable: Bool = true) throws(VaultError) {
        try writing(durable: durable) { (store) throws(VaultError) in
            let record = try store.existingRecord(id)
            try store.deleteAttribute(property.storedName, of: record)
            _ = try store.attributesChanged(of: record, at: .now())
        }
    }

    // MARK: by path

    public func property(_ property: ItemProperty, at path: VaultPath) throws(VaultError) -> SecureBuffer? {
        try reading(naming: .paths) { (store) throws(VaultError) -> SecureBuffer? in
            try store.attributeValue(property.storedName, of: try resolve(path, in: store))
        }
    }

    public func setProperty(_ property: ItemProperty, to value: borrowing SecureBuffer?, at path: VaultPath) throws(VaultError) {
        try writing(naming: .paths) { (store) throws(VaultError) in
            let record = try resolve(path, in: store)
            try Vault.store(property, value, on: record, mode: .createOrReplace, in: store)
            _ = try store.attributesChanged(of: record, at: .now())
        }
    }

    private static func store(_ property: ItemProperty, _ value: borrowing SecureBuffer?, on record: NodeRecord,
                              mode: AttributeSetMode, in store: NodeStore) throws(VaultError) {
        switch value {
        case .some(let value):
            try store.putAttribute(property.storedName, value, on: record, mode: mode)
        case .none:
            try store.changeAttributes(of: record, set: [], removing: [property.storedName], replacingUserAttributes: false)
        }
    }

    // MARK: whole items

    /// One transaction, all or nothing: a new item `name` in `parent` (0600, of the class an
    /// item created there gets) with its content, user attributes, label and content type
    /// (nil: not set).
    public func createItem(named name: ItemName, in parent: NodeID, content: borrowing SecureBuffer, attributes: [Attribute],
                           label: borrowing SecureBuffer?, contentType: borrowing SecureBuffer?) throws(VaultError) -> Node {
        try checkItemSize(content.count)
        let (set, removing) = try Vault.attributeChanges(attributes, label: label, contentType: contentType)
        return try writing { (store) throws(VaultError) -> Node in
            let dictionary = try store.dictionary(parent)
            guard try store.child(named: name, in: parent) == nil else {
                throw .alreadyExists(store.describe(parent, appending: name))
            }
            let node = try store.insertItem(named: name, in: dictionary, mode: 0o600, content: content)
            try store.changeAttributes(of: try store.existingRecord(node.id), set: set, removing: removing,
                                       replacingUserAttributes: true)
            return node
        }
    }

    /// One transaction, all or nothing: an existing item's content, all its user attributes,
    /// its label and its content type (nil: removed) are replaced. Its class, mode and name stay.
    public func replaceItem(_ id: NodeID, content: borrowing SecureBuffer, attributes: [Attribute],
                            label: borrowing SecureBuffer?, contentType: borrowing SecureBuffer?) throws(VaultError) -> Node {
        try checkItemSize(content.count)
        let (set, removing) = try Vault.attributeChanges(attributes, label: label, contentType: contentType)
        return try writing { (store) throws(VaultError) -> Node in
            let record = try store.existingRecord(id)
            guard record.kind == .item else { throw .isADictionary(store.describe(id)) }
            try store.changeAttributes(of: record, set: set, removing: removing, replacingUserAttributes: true)
            // Last: the content's write carries the change time of the whole replacement.
            let attributes = try store.writeContent(content, of: record, modified: .now())
            return Node(id: id, parent: record.parent, attributes: attributes)
        }
    }

    // MARK: names from labels

    /// A readable, unused item name in `parent` made from a label (see `ItemName.base(fromLabel:)`),
    /// cut to fit on a character boundary; if it is taken, " 2", " 3", ... is added.
    public func availableItemName(fromLabel label: borrowing SecureBuffer, in parent: NodeID) throws(VaultError) -> ItemName {
        let base = try ItemName.base(fromLabel: label)
        return try reading { (store) throws(VaultError) -> ItemName in
            _ = try store.dictionary(parent)
            var number = 1
            while true {
                let candidate = try ItemName(base: base, number: number)
                if try store.child(named: candidate, in: parent) == nil { return candidate }
                number += 1
            }
        }
    }

    /// What a whole item's attributes become: the user's, and each property set or removed.
    /// The properties are copied (into locked memory) to be stored in one step with the rest.
    private static func attributeChanges(_ attributes: [Attribute], label: borrowing SecureBuffer?,
                                         contentType: borrowing SecureBuffer?) throws(VaultError) -> (set: [Attribute], removing: [AttributeName]) {
        var set = attributes
        var removing: [AttributeName] = []
        try propertyChange(.label, label, set: &set, removing: &removing)
        try propertyChange(.contentType, contentType, set: &set, removing: &removing)
        return (set, removing)
    }

    /// A property set (copied into `set`, locked memory) or, when nil, removed: an item's
    /// store and an import's both change properties this way.
    static func propertyChange(_ property: ItemProperty, _ value: borrowing SecureBuffer?,
                               set: inout [Attribute], removing: inout [AttributeName]) throws(VaultError) {
        switch value {
        case .some(let value):
            let copy = try value.withUnsafeBytes { (bytes) throws(VaultError) in try SecureBuffer(copying: bytes) }
            set.append(Attribute(name: property.storedName, value: copy))
        case .none:
            removing.append(property.storedName)
        }
    }
}
