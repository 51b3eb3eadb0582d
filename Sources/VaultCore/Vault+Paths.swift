/// Operations by path (`app/token`): what the command line uses. Each is one transaction.
extension Vault {
    /// Walks `path` from the root; errors name the first component that is missing or not a dictionary.
    func resolve(_ path: VaultPath, in store: NodeStore) throws(VaultError) -> NodeRecord {
        var record = try store.existingRecord(.root)
        var walked = VaultPath.root
        for component in path.components {
            guard record.kind == .dictionary else { throw .notADictionary(walked.description) }
            walked = walked.appending(component)
            guard let child = try store.child(named: component, in: record.id) else {
                throw .notFound(walked.description)
            }
            record = child
        }
        return record
    }

    /// The dictionary at `path`, creating missing ones (0700) when `creating`.
    func dictionary(at path: VaultPath, creating: Bool, in store: NodeStore) throws(VaultError) -> NodeRecord {
        var record = try store.existingRecord(.root)
        var walked = VaultPath.root
        for component in path.components {
            walked = walked.appending(component)
            if let child = try store.child(named: component, in: record.id) {
                guard child.kind == .dictionary else { throw .notADictionary(walked.description) }
                record = child
            } else if creating {
                let created = try store.insertDictionary(named: component, in: record, mode: 0o700)
                record = try store.existingRecord(created.id)
            } else {
                throw .notFound(walked.description)
            }
        }
        return record
    }

    private func leafName(_ path: VaultPath) throws(VaultError) -> ItemName {
        guard let name = path.lastComponent else { throw .invalidArgument("the path names the root dictionary") }
        return name
    }

    public func node(at path: VaultPath) throws(VaultError) -> Node {
        try reading(naming: .paths) { (store) throws(VaultError) in try resolve(path, in: store).node }
    }

    /// The item's exact bytes in locked memory.
    public func read(_ path: VaultPath) throws(VaultError) -> SecureBuffer {
        try reading(naming: .paths) { (store) throws(VaultError) -> SecureBuffer in
            let record = try resolve(path, in: store)
            guard record.kind == .item else { throw .isADictionary(path.description) }
            do throws(VaultError) {
                return try store.content(of: record)
            } catch .integrityFailure {
                throw .integrityFailure(path.description)
            }
        }
    }

    /// Stores `content` at `path`, replacing an existing item and creating missing dictionaries,
    /// and sets `attributes` on it (each created or replaced; the item's other attributes stay),
    /// all in one transaction: over any limit, nothing is stored. The item's class becomes
    /// `accessibility` when given; else a new item takes the nearest dictionary default and a
    /// replaced one keeps its class.
    @discardableResult
    public func store(_ content: borrowing SecureBuffer, at path: VaultPath, attributes: [Attribute] = [],
                      accessibility: AccessibilityClass? = nil) throws(VaultError) -> Node {
        let name = try leafName(path)
        try checkItemSize(content.count)
        return try writing(naming: .paths) { (store) throws(VaultError) -> Node in
            let parent = try dictionary(at: path.parent, creating: true, in: store)
            var node: Node
            if let existing = try store.child(named: name, in: parent.id) {
                guard existing.kind == .item else { throw .isADictionary(path.description) }
                var target = existing
                if let accessibility, accessibility != existing.attributes.accessibility {
                    // The new content is sealed under the new class's key: the old content is
                    // never opened.
                    var changed = existing.attributes
                    changed.accessibility = accessibility
                    target = NodeRecord(place: existing.place, parent: existing.parent, attributes: changed)
                    if accessibility == .afterFirstUnlock { try store.resealAncestorsInCurrentLayout(from: parent.id) }
                }
                let attributes = try store.writeContent(content, of: target, modified: .now())
                node = Node(id: existing.id, parent: parent.id, attributes: attributes)
            } else {
                node = try store.insertItem(named: name, in: parent, mode: 0o600, content: content, accessibility: accessibility)
            }
            guard !attributes.isEmpty else { return node }
            let record = try store.existingRecord(node.id)
            for attribute in attributes { try store.putAttribute(attribute.name, attribute.value, on: record, mode: .createOrReplace) }
            node.attributes = try store.attributesChanged(of: record, at: .now())
            return node
        }
    }

    /// Entries of the dictionary at `path`, sorted by name.
    public func list(_ path: VaultPath) throws(VaultError) -> [DirectoryEntry] {
        try reading(naming: .paths) { (store) throws(VaultError) in
            let record = try resolve(path, in: store)
            guard record.kind == .dictionary else { throw .notADictionary(path.description) }
            return try store.children(of: record)
                .map { DirectoryEntry(name: $0.name, node: $0.record.node) }
                .sorted { $0.name < $1.name }
        }
    }

    @discardableResult
    public func makeDictionary(at path: VaultPath, withIntermediates: Bool) throws(VaultError) -> Node {
        let name = try leafName(path)
        return try writing(naming: .paths) { (store) throws(VaultError) -> Node in
            let parent = try dictionary(at: path.parent, creating: withIntermediates, in: store)
            if let existing = try store.child(named: name, in: parent.id) {
                guard withIntermediates, existing.kind == .dictionary else { throw .alreadyExists(path.description) }
                return existing.node
            }
            return try store.insertDictionary(named: name, in: parent, mode: 0o700)
        }
    }

    /// Removes an item, an empty dictionary, or with `recursive` a whole subtree.
    public func remove(_ path: VaultPath, recursive: Bool) throws(VaultError) {
        let name = try leafName(path)
        try writing(naming: .paths) { (store) throws(VaultError) in
            let parent = try dictionary(at: path.parent, creating: false, in: store)
            guard let record = try store.child(named: name, in: parent.id) else { throw .notFound(path.description) }
            if record.kind == .dictionary, !recursive, try store.hasChildren(record.id) {
                throw .notEmpty(path.description)
            }
            try store.remove(record, from: parent, at: .now())
        }
    }

    /// `mv` semantics: into `destination` if it is a dictionary, else to that name (replacing an item).
    public func move(_ source: VaultPath, to destination: VaultPath) throws(VaultError) {
        let sourceName = try leafName(source)
        try writing(naming: .paths) { (store) throws(VaultError) in
            let sourceParent = try dictionary(at: source.parent, creating: false, in: store).id
            guard let moving = try store.child(named: sourceName, in: sourceParent) else { throw .notFound(source.description) }
            var targetParent = NodeID.root
            var targetName = sourceName
            if !destination.isRoot {
                targetParent = try dictionary(at: destination.parent, creating: false, in: store).id
                targetName = try leafName(destination)
                if let existing = try store.child(named: targetName, in: targetParent), existing.kind == .dictionary,
                   existing.id != moving.id {
                    (targetParent, targetName) = (existing.id, sourceName)
                }
            }
            try moveNode(store, sourceName, from: sourceParent, to: targetName, in: targetParent, replacing: true)
        }
    }
}
