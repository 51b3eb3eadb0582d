/// A node's row, authenticated: its attributes (and so its kind) opened and checked against
/// the row. The content column is loaded only when read.
struct NodeRecord {
    let place: RecordPlace
    let parent: NodeID
    let attributes: NodeAttributes

    var id: NodeID { place.node }
    var kind: NodeKind { attributes.kind }
    var node: Node { Node(id: id, parent: parent, attributes: attributes) }
}

/// The node operations on one storage with one set of keys, each a step inside a
/// transaction the caller opened. Every record is authenticated here before anything
/// (including its kind) is used; the storage below sees only ciphertext, tags and ids.
struct NodeStore {
    let storage: any VaultStorage
    let cipher: RecordCipher
    /// How messages name what they are about. Paths for the command line, which prints them
    /// and exits; node numbers for the daemon, which keeps no decrypted name outside wiped
    /// memory (a String cannot be wiped) and turns errors into errnos anyway.
    var naming: MessageNaming = .nodes
    /// Who signs the access log batches appended in this store's transaction (`LogSigner`).
    var signer: LogSigner? = nil

    enum MessageNaming {
        case paths, nodes
    }

    /// What to do with a row's sealed name: it is only opened when a caller needs it (listing)
    /// or found the row through it (lookup); reaching a node by id relies on its attributes,
    /// which are bound to the node's id and incarnation.
    enum NameCheck {
        case skip
        case expect(ItemName)
        case decode
    }

    /// Whether the vault is locked: the cipher holds only what after-first-unlock items need.
    var isLocked: Bool { !cipher.holdsEveryKey }

    /// Authenticates a row: its attributes always, its name as `names` says. While locked, only
    /// dictionaries and after-first-unlock items pass; anything else is `.locked` (an older
    /// record's key is gone anyway), so no operation can reach another item by mistake.
    func authenticate(_ row: NodeRow, names: NameCheck = .skip) throws(VaultError) -> (NodeRecord, ItemName?) {
        let place = RecordPlace(node: row.id, incarnation: row.incarnation)
        guard let attributes = try cipher.openAttributes(row.sealedAttributes, place), attributes.kind.rawValue == row.kind else {
            throw .integrityFailure(describe(place.node))
        }
        if isLocked && attributes.kind == .item && attributes.accessibility != .afterFirstUnlock { throw .locked }
        var name: ItemName? = nil
        switch names {
        case .skip:
            break
        case .expect(let expected):
            name = cipher.openName(row.sealedName, place, parent: row.parent)
            guard name == expected else { throw .integrityFailure(describe(place.node)) }
        case .decode:
            if place.node != .root {
                name = cipher.openName(row.sealedName, place, parent: row.parent)
                guard name != nil else { throw .integrityFailure(describe(place.node)) }
            }
        }
        return (NodeRecord(place: place, parent: row.parent, attributes: attributes), name)
    }

    func record(_ id: NodeID) throws(VaultError) -> NodeRecord? {
        guard let row = try storage.node(id) else { return nil }
        return try authenticate(row).0
    }

    func name(of id: NodeID) throws(VaultError) -> ItemName? {
        guard id != .root else { return nil }
        guard let row = try storage.node(id) else { throw .notFound("node \(id)") }
        return try authenticate(row, names: .decode).1
    }

    /// The node `id` and its name (nil for the root), both authenticated; nil when there is no such node.
    func recordAndName(_ id: NodeID) throws(VaultError) -> (record: NodeRecord, name: ItemName?)? {
        guard let row = try storage.node(id) else { return nil }
        return try authenticate(row, names: .decode)
    }

    func existingRecord(_ id: NodeID) throws(VaultError) -> NodeRecord {
        guard let record = try record(id) else { throw .notFound(id == .root ? "/" : "node \(id)") }
        return record
    }

    /// The dictionary `id`, or the reason it cannot hold children.
    func dictionary(_ id: NodeID) throws(VaultError) -> NodeRecord {
        let record = try existingRecord(id)
        guard record.kind == .dictionary else { throw .notADictionary(describe(id)) }
        return record
    }

    /// Finds `name` in `parent` by its tag, then checks the stored name really is `name`:
    /// a moved or forged row cannot answer for another.
    func child(named name: ItemName, in parent: NodeID) throws(VaultError) -> NodeRecord? {
        guard let row = try storage.node(in: parent, nameTag: cipher.tag(for: name, in: parent)) else { return nil }
        return try authenticate(row, names: .expect(name)).0
    }

    /// A dictionary's entries. Their number must match the count sealed in the dictionary's
    /// attributes, so a deleted or smuggled-in row shows as an integrity failure.
    func children(of parent: NodeRecord) throws(VaultError) -> [(name: ItemName, record: NodeRecord)] {
        var result: [(name: ItemName, record: NodeRecord)] = []
        for row in try storage.children(of: parent.id) {
            let (record, name) = try authenticate(row, names: .decode)
            result.append((name!, record))
        }
        guard result.count == parent.attributes.size else {
            throw .integrityFailure(describe(parent.id) + " (\(parent.attributes.size) entries recorded, \(result.count) found)")
        }
        return result
    }

    /// Whether `record` may go the way unlink (`kind` item) or rmdir (`kind` dictionary) would
    /// take it, as rename does with what it replaces: same kind, and a dictionary must be empty.
    func checkRemovable(_ record: NodeRecord, as kind: NodeKind, path: String) throws(VaultError) {
        switch (kind, record.kind) {
        case (.item, .dictionary): throw .isADictionary(path)
        case (.dictionary, .item): throw .notADictionary(path)
        case (.dictionary, .dictionary):
            if try hasChildren(record.id) { throw .notEmpty(path) }
        case (.item, .item): break
        }
    }

    func hasChildren(_ id: NodeID) throws(VaultError) -> Bool {
        try storage.hasChildren(id)
    }

    /// Inside the transaction `record` was read in, so its blocks are of the same version.
    func content(of record: NodeRecord) throws(VaultError) -> SecureBuffer {
        try wholeContent(of: record, sealed: try storage.sealedContent(of: record.id))
    }

    /// The item `id` and its content from one snapshot: one storage call for a small item, a
    /// read transaction for a large one, whose blocks must be of the row's version.
    func item(_ id: NodeID) throws(VaultError) -> Vault.ItemSnapshot {
        guard let (row, sealed) = try storage.nodeAndContent(id) else { throw .notFound(id == .root ? "/" : "node \(id)") }
        let record = try authenticate(row).0
        guard record.kind == .item else { throw .isADictionary(describe(id)) }
        guard NodeStore.isBlocked(record.attributes.size) else {
            return Vault.ItemSnapshot(node: record.node, content: try content(of: record, sealed: sealed))
        }
        return try storage.read { () throws(VaultError) -> Vault.ItemSnapshot in
            guard let (row, sealed) = try storage.nodeAndContent(id) else { throw .notFound("node \(id)") }
            let record = try authenticate(row).0
            guard record.kind == .item else { throw .isADictionary(describe(id)) }
            return Vault.ItemSnapshot(node: record.node, content: try wholeContent(of: record, sealed: sealed))
        }
    }

    /// A content stored whole (see `NodeStore+Content`).
    func content(of record: NodeRecord, sealed: [UInt8]?) throws(VaultError) -> SecureBuffer {
        let accessibility = record.attributes.accessibility
        guard let sealed else { throw .integrityFailure(describe(record.id)) }
        let opened: SecureBuffer?
        do {
            opened = try cipher.openContent(sealed, record.place, generation: record.attributes.contentGeneration,
                                            expectedCount: record.attributes.size, accessibility: accessibility)
        } catch .otherDevice {
            // A host key sealed by another TPM (or by none here) refuses as another host key does.
            opened = nil
        }
        guard let content = opened else {
            // Another host key and a damaged record look the same to the cipher; the class
            // says which is likely, and the message names both.
            throw accessibility == .thisDeviceOnly ? .otherDevice(describe(record.id)) : .integrityFailure(describe(record.id))
        }
        return content
    }

    // MARK: writes

    private func allocatePlace() throws(VaultError) -> RecordPlace {
        let id = try storage.allocateNodeID()
        // The counter lies outside every MAC, open to anyone who may write the tables: one set
        // back must not hand out an id no record may have (a mount makes inodes of them).
        guard id.rawValue > NodeID.root.rawValue else { throw .integrityFailure("vault header (next record id)") }
        return RecordPlace.new(id)
    }

    /// Adds an item under `parent`, whose entry count goes up by one. Its class is
    /// `accessibility`, or else the nearest default of `parent` and its ancestors.
    func insertItem(named name: ItemName, in parent: NodeRecord, mode: UInt32,
                    content: borrowing SecureBuffer, accessibility: AccessibilityClass? = nil) throws(VaultError) -> Node {
        let place = try allocatePlace()
        var chosen = AccessibilityClass.whenUnlocked
        if let accessibility { chosen = accessibility } else { chosen = try defaultClass(below: parent) }
        try checkClassAllowed(chosen, for: describe(parent.id, appending: name))
        let sealed = try storeContent(content, place, generation: 1, accessibility: chosen, previousSize: nil)
        if chosen == .afterFirstUnlock { try resealAncestorsInCurrentLayout(from: parent.id) }
        return try insertRow(place, name: name, in: parent, kind: .item, mode: mode, size: content.count, sealedContent: sealed,
                             accessibility: chosen)
    }

    /// The class of an item created in `dictionary`: the nearest default up the path.
    func defaultClass(below dictionary: NodeRecord) throws(VaultError) -> AccessibilityClass {
        var current = dictionary
        var steps = 0
        while true {
            if let found = current.attributes.defaultClass { return found }
            if current.id == .root { return .whenUnlocked }
            current = try existingRecord(current.parent)
            steps += 1
            if steps > 100_000 { throw .integrityFailure("dictionary tree (cycle at \(dictionary.id))") }
        }
    }

    /// Seals `id` and its ancestors again in the current layout where they are older: what a
    /// locked vault needs to walk the path to an after-first-unlock item, since older layouts
    /// are under the when-unlocked content key, which a lock wipes.
    func resealAncestorsInCurrentLayout(from id: NodeID) throws(VaultError) {
        var current = id
        var steps = 0
        while let row = try storage.node(current) {
            if !RecordCipher.isCurrentLayout(row.sealedAttributes) {
                let record = try authenticate(row).0
                try writeAttributes(record.attributes, of: record)
            }
            if current == .root { return }
            current = row.parent
            steps += 1
            if steps > 100_000 { throw .integrityFailure("dictionary tree (cycle at \(id))") }
        }
    }

    /// Changes an item's class: its content is sealed again under the new class's key, with
    /// the same generation (the bytes are the same; the class in the associated data tells the
    /// two sealings apart). Returns the new attributes.
    func changeClass(of record: NodeRecord, to accessibility: AccessibilityClass, at time: Timestamp) throws(VaultError) -> NodeAttributes {
        var attributes = record.attributes
        guard attributes.accessibility != accessibility else { return attributes }
        try checkClassAllowed(accessibility, for: describe(record.id))
        var content = try content(of: record)
        attributes.accessibility = accessibility
        attributes.changed = max(time, attributes.changed)
        let sealed = try storeContent(inPlace: &content, record.place, generation: attributes.contentGeneration,
                                      accessibility: accessibility, previousSize: record.attributes.size)
        if accessibility == .afterFirstUnlock { try resealAncestorsInCurrentLayout(from: record.parent) }
        try storage.updateAttributesAndContent(of: record.id, sealedAttributes: cipher.sealAttributes(attributes, record.place),
                                               sealedContent: sealed)
        return attributes
    }

    /// Sets or clears (nil) a dictionary's default class.
    func changeDefaultClass(of record: NodeRecord, to defaultClass: AccessibilityClass?, at time: Timestamp) throws(VaultError) -> NodeAttributes {
        try checkClassAllowed(defaultClass, for: describe(record.id))
        var attributes = record.attributes
        attributes.defaultClass = defaultClass
        attributes.changed = max(time, attributes.changed)
        try writeAttributes(attributes, of: record)
        return attributes
    }

    /// Adds an empty dictionary under `parent`, whose entry and subdictionary counts go up by one.
    func insertDictionary(named name: ItemName, in parent: NodeRecord, mode: UInt32) throws(VaultError) -> Node {
        try insertRow(try allocatePlace(), name: name, in: parent, kind: .dictionary, mode: mode, size: 0, sealedContent: nil)
    }

    private func insertRow(_ place: RecordPlace, name: ItemName, in parent: NodeRecord, kind: NodeKind, mode: UInt32,
                           size: Int, sealedContent: [UInt8]?, accessibility: AccessibilityClass = .whenUnlocked) throws(VaultError) -> Node {
        let now = Timestamp.now()
        let attributes = NodeAttributes(kind: kind, mode: mode & 0o7777, size: size, at: now,
                                        contentGeneration: kind == .item ? 1 : 0, accessibility: accessibility)
        try storage.insertNode(NodeRow(id: place.node, parent: parent.id, kind: kind.rawValue, incarnation: place.incarnation,
                                       nameTag: cipher.tag(for: name, in: parent.id),
                                       sealedName: cipher.sealName(name, place, parent: parent.id),
                                       sealedAttributes: cipher.sealAttributes(attributes, place)),
                               sealedContent: sealedContent)
        try changeEntries(of: parent, by: 1, subdictionaries: kind == .dictionary ? 1 : 0, at: now)
        return Node(id: place.node, parent: parent.id, attributes: attributes)
    }

    func writeAttributes(_ attributes: NodeAttributes, of record: NodeRecord) throws(VaultError) {
        try storage.updateAttributes(of: record.id, sealedAttributes: cipher.sealAttributes(attributes, record.place))
    }

    /// Replaces an item's content; returns its new attributes. The access time is left as it
    /// was: only creation and `setAttributes` set it.
    func writeContent(_ content: borrowing SecureBuffer, of record: NodeRecord, modified: Timestamp,
                      changed: Timestamp? = nil) throws(VaultError) -> NodeAttributes {
        try writeContent(count: content.count, of: record, modified: modified, changed: changed) { (place, generation) throws(VaultError) in
            try storeContent(content, place, generation: generation, accessibility: record.attributes.accessibility,
                             previousSize: record.attributes.size)
        }
    }

    /// Replaces an item's content with what `seal` encrypts for its place and new generation,
    /// under the key of the item's class (storing blocks itself when the content is large).
    func writeContent(count: Int, of record: NodeRecord, modified: Timestamp, changed: Timestamp?,
                      seal: (RecordPlace, UInt64) throws(VaultError) -> [UInt8]) throws(VaultError) -> NodeAttributes {
        var attributes = record.attributes
        attributes.contentGeneration += 1
        attributes.size = count
        attributes.modified = modified
        attributes.changed = max(changed ?? Timestamp.now(), attributes.changed)
        let sealed = try seal(record.place, attributes.contentGeneration)
        try storage.updateAttributesAndContent(of: record.id, sealedAttributes: cipher.sealAttributes(attributes, record.place),
                                               sealedContent: sealed)
        return attributes
    }

    /// Moves a node under a new parent and name; its content is untouched.
    func relink(_ record: NodeRecord, to parent: NodeID, as name: ItemName, at time: Timestamp) throws(VaultError) {
        // What is moved may be or hold an after-first-unlock item: its new path must be walkable
        // while locked. A few rows at most, once each.
        try resealAncestorsInCurrentLayout(from: parent)
        var attributes = record.attributes
        attributes.changed = time
        try storage.relink(record.id, to: parent, nameTag: cipher.tag(for: name, in: parent),
                           sealedName: cipher.sealName(name, record.place, parent: parent),
                           sealedAttributes: cipher.sealAttributes(attributes, record.place))
    }

    /// Deletes `record` (with everything below it) from `dictionary`, whose counts follow.
    func remove(_ record: NodeRecord, from dictionary: NodeRecord, at time: Timestamp) throws(VaultError) {
        try delete(record)
        try changeEntries(of: dictionary, by: -1, subdictionaries: record.kind == .dictionary ? -1 : 0, at: time)
    }

    /// Deletes a node and, for a dictionary, everything below it, their attributes and access
    /// rules with them.
    private func delete(_ record: NodeRecord) throws(VaultError) {
        // First: the subtree is found through the node rows.
        try storage.deleteAttributes(of: record.id, subtree: record.kind == .dictionary)
        try deleteRules(of: record, subtree: record.kind == .dictionary)
        if record.kind == .dictionary {
            try storage.deleteSubtree(record.id)
        } else {
            try storage.deleteNode(record.id)
        }
    }

    /// A dictionary's entry count, subdictionary count and modification time follow changes to
    /// its entries.
    func changeEntries(of dictionary: NodeRecord, by delta: Int, subdictionaries: Int = 0, at time: Timestamp) throws(VaultError) {
        // Re-read: an earlier step of the same transaction may have changed it.
        var attributes = try existingRecord(dictionary.id).attributes
        attributes.size += delta
        attributes.subdictionaries += subdictionaries
        attributes.modified = time
        attributes.changed = time
        try writeAttributes(attributes, of: dictionary)
    }

    /// Every dictionary (the root first) and item with its path, each before what is below it,
    /// names sorted (so items come in the order of their paths' components): the tree as records,
    /// no content read. Inside the caller's read, one snapshot.
    func tree() throws(VaultError) -> [(path: VaultPath, record: NodeRecord)] {
        var order: [(path: VaultPath, record: NodeRecord)] = []
        var pending: [(path: VaultPath, record: NodeRecord)] = [(.root, try existingRecord(.root))]
        while let (path, record) = pending.popLast() {
            order.append((path, record))
            guard record.kind == .dictionary else { continue }
            let children = try children(of: record).sorted { $0.name < $1.name }
            for child in children.reversed() { pending.append((path.appending(child.name), child.record)) }
        }
        return order
    }

    /// Every item of the vault, each authenticated; a malformed row fails the whole listing,
    /// as a damaged row fails `children(of:)`.
    func everyItem() throws(VaultError) -> [NodeRecord] {
        var items: [NodeRecord] = []
        for stored in try storage.everyNode() {
            switch stored {
            case .row(let row, _) where row.kind == NodeKind.item.rawValue:
                let record = try authenticate(row).0
                items.append(record)
            case .row:
                continue
            case .malformed(let id):
                throw .integrityFailure(id.map { describe(NodeID($0)) } ?? "a node record")
            }
        }
        return items
    }

    /// Whether any item is after-first-unlock: what decides whether a lock keeps any key. Only
    /// items in the current layout can be; each is opened (a lock is rare, and the class is
    /// sealed, so nothing outside the records may tell).
    func holdsAfterFirstUnlockItem() throws(VaultError) -> Bool {
        for case .row(let row, _) in try storage.everyNode()
        where row.kind == NodeKind.item.rawValue && RecordCipher.isCurrentLayout(row.sealedAttributes) {
            let place = RecordPlace(node: row.id, incarnation: row.incarnation)
            if try cipher.openAttributes(row.sealedAttributes, place)?.accessibility == .afterFirstUnlock { return true }
        }
        return false
    }

    /// Whether `ancestor` is `id` or one of its ancestors.
    func isAncestor(_ ancestor: NodeID, of id: NodeID) throws(VaultError) -> Bool {
        var current = id
        var steps = 0
        while true {
            if current == ancestor { return true }
            if current == .root { return false }
            guard let parent = try storage.parent(of: current) else { return false }
            current = parent
            steps += 1
            if steps > 100_000 { throw .integrityFailure("dictionary tree (cycle at \(id))") }
        }
    }

    // MARK: paths for messages

    /// A readable path for `id`, as far as its ancestors decrypt (or only its number, as
    /// `naming` says); for messages only.
    func describe(_ id: NodeID) -> String {
        guard naming == .paths else { return id == .root ? "/" : "node \(id)" }
        var parts: [String] = []
        var current = id
        while current != .root, parts.count < 256 {
            guard let row = try? storage.node(current) else {
                parts.append("<record \(current.rawValue)>")
                break
            }
            let place = RecordPlace(node: current, incarnation: row.incarnation)
            parts.append(cipher.openName(row.sealedName, place, parent: row.parent)?.description ?? "<record \(current.rawValue)>")
            current = row.parent
        }
        return parts.isEmpty ? "/" : parts.reversed().joined(separator: "/")
    }

    func describe(_ parent: NodeID, appending name: ItemName) -> String {
        guard naming == .paths else { return "an entry of " + (parent == .root ? "the root dictionary" : "node \(parent)") }
        return parent == .root ? name.description : describe(parent) + "/" + name.description
    }
}
