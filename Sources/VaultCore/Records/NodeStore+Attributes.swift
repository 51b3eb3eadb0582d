/// A node's own attributes (extended attributes), each step inside a transaction the caller
/// opened. A row is trusted only once its name and value open under the node's place and the
/// row's tag, so a row moved to another node, or to another name of the same node, fails.
extension NodeStore {
    /// An attribute for messages: with `.paths` (the command line, which prints names anyway)
    /// the node's path and the attribute's name; with `.nodes` the node's number only.
    func describe(_ name: AttributeName, of id: NodeID) -> String {
        guard naming == .paths else { return describe(id) }
        return describe(id) + ", attribute \"\(name.description)\""
    }

    private func integrityFailure(ofAttributesOf id: NodeID) -> VaultError {
        .integrityFailure(describe(id) + " (attributes)")
    }

    /// Opens a row of `record`. A failure is an integrity failure: the row was damaged, or
    /// belongs to another node or another name.
    private func open(_ row: AttributeRow, of record: NodeRecord) throws(VaultError) -> Attribute {
        guard let name = cipher.openAttributeName(row.sealedName, record.place, tag: row.tag),
              let value = try cipher.openAttributeValue(row.sealedValue, record.place, tag: row.tag) else {
            throw integrityFailure(ofAttributesOf: record.id)
        }
        return Attribute(name: name, value: value)
    }

    /// The value of `name` on `record`; nil when it has no such attribute.
    func attributeValue(_ name: AttributeName, of record: NodeRecord) throws(VaultError) -> SecureBuffer? {
        guard let row = try storage.attribute(of: record.id, tag: cipher.attributeTag(for: name, of: record.id)) else {
            return nil
        }
        guard cipher.openAttributeName(row.sealedName, record.place, tag: row.tag) == name,
              let value = try cipher.openAttributeValue(row.sealedValue, record.place, tag: row.tag) else {
            throw integrityFailure(ofAttributesOf: record.id)
        }
        return value
    }

    /// Every user attribute of `record` (its properties, under reserved names, are not), sorted
    /// by name. A property's value is not decrypted.
    func attributes(of record: NodeRecord) throws(VaultError) -> [Attribute] {
        var result: [Attribute] = []
        for row in try storage.attributes(of: record.id) {
            let name = try openName(of: row, of: record)
            guard !name.isReserved else { continue }
            guard let value = try cipher.openAttributeValue(row.sealedValue, record.place, tag: row.tag) else {
                throw integrityFailure(ofAttributesOf: record.id)
            }
            result.append(Attribute(name: name, value: value))
        }
        return result.sorted { $0.name < $1.name }
    }

    /// The user attributes' names only (no value is decrypted), sorted.
    func attributeNames(of record: NodeRecord) throws(VaultError) -> [AttributeName] {
        var names: [AttributeName] = []
        for row in try storage.attributes(of: record.id) {
            let name = try openName(of: row, of: record)
            if !name.isReserved { names.append(name) }
        }
        return names.sorted()
    }

    private func openName(of row: AttributeRow, of record: NodeRecord) throws(VaultError) -> AttributeName {
        guard let name = cipher.openAttributeName(row.sealedName, record.place, tag: row.tag) else {
            throw integrityFailure(ofAttributesOf: record.id)
        }
        return name
    }

    /// Stores `name` = `value` on `record` as `mode` allows, within the limits (over one,
    /// nothing is stored). The node's change time is the caller's (`attributesChanged`), so a
    /// command setting several attributes rewrites the node once.
    func putAttribute(_ name: AttributeName, _ value: borrowing SecureBuffer, on record: NodeRecord,
                      mode: AttributeSetMode) throws(VaultError) {
        guard value.count <= Vault.maximumAttributeValueBytes else {
            throw .attributeTooLarge(size: value.count, limit: Vault.maximumAttributeValueBytes)
        }
        let tag = cipher.attributeTag(for: name, of: record.id)
        var exists = false
        // Linux counts a node's names and values together against one limit; that needs the
        // other attributes' lengths, which only their opened records give.
        var total = name.count + value.count
        for row in try storage.attributes(of: record.id) {
            if row.tag == tag {
                exists = true
                continue
            }
            let other = try open(row, of: record)
            total += other.name.count + other.value.count
        }
        switch mode {
        case .create where exists: throw .attributeExists(describe(name, of: record.id))
        case .replace where !exists: throw .noSuchAttribute(describe(name, of: record.id))
        default: break
        }
        guard total <= Vault.maximumAttributeBytesPerNode else { throw .attributesFull(describe(record.id)) }
        try upsertAttribute(name, value, on: record, tag: tag)
    }

    private func upsertAttribute(_ name: AttributeName, _ value: borrowing SecureBuffer, on record: NodeRecord,
                                 tag: [UInt8]) throws(VaultError) {
        try storage.upsertAttribute(AttributeRow(node: record.id, tag: tag,
                                                 searchTag: cipher.attributeSearchTag(name: name, value: value),
                                                 sealedName: cipher.sealAttributeName(name, record.place, tag: tag),
                                                 sealedValue: try cipher.sealAttributeValue(value, record.place, tag: tag)))
    }

    /// Changes several attributes of `record` in one step, within the limits (over one,
    /// nothing is stored): each of `set` is created or replaced, each of `removing` goes if
    /// it is there, and with `replacingUserAttributes` so does every other user attribute
    /// (reserved ones stay unless named). The change time is the caller's.
    func changeAttributes(of record: NodeRecord, set: [Attribute], removing: [AttributeName] = [],
                          replacingUserAttributes: Bool) throws(VaultError) {
        var setTags: Set<[UInt8]> = []
        var total = 0
        for attribute in set {
            guard setTags.insert(cipher.attributeTag(for: attribute.name, of: record.id)).inserted else {
                throw .invalidArgument("the same attribute name is given twice")
            }
            guard attribute.value.count <= Vault.maximumAttributeValueBytes else {
                throw .attributeTooLarge(size: attribute.value.count, limit: Vault.maximumAttributeValueBytes)
            }
            total += attribute.name.count + attribute.value.count
        }
        let removedTags = Set(removing.map { cipher.attributeTag(for: $0, of: record.id) })
        var stale: [[UInt8]] = []
        // What stays counts against the node's limit: only those values are decrypted.
        for row in try storage.attributes(of: record.id) where !setTags.contains(row.tag) {
            if removedTags.contains(row.tag) {
                stale.append(row.tag)
                continue
            }
            let name = try openName(of: row, of: record)
            if replacingUserAttributes && !name.isReserved {
                stale.append(row.tag)
                continue
            }
            guard let value = try cipher.openAttributeValue(row.sealedValue, record.place, tag: row.tag) else {
                throw integrityFailure(ofAttributesOf: record.id)
            }
            total += name.count + value.count
        }
        guard total <= Vault.maximumAttributeBytesPerNode else { throw .attributesFull(describe(record.id)) }
        for tag in stale { _ = try storage.deleteAttribute(of: record.id, tag: tag) }
        for attribute in set {
            try upsertAttribute(attribute.name, attribute.value, on: record, tag: cipher.attributeTag(for: attribute.name, of: record.id))
        }
    }

    func deleteAttribute(_ name: AttributeName, of record: NodeRecord) throws(VaultError) {
        guard try storage.deleteAttribute(of: record.id, tag: cipher.attributeTag(for: name, of: record.id)) else {
            throw .noSuchAttribute(describe(name, of: record.id))
        }
    }

    /// The node's change time follows a change of its attributes, as setxattr's does on Linux.
    func attributesChanged(of record: NodeRecord, at time: Timestamp) throws(VaultError) -> NodeAttributes {
        // Re-read: an earlier step of the same transaction may have changed it.
        var attributes = try existingRecord(record.id).attributes
        attributes.changed = max(time, attributes.changed)
        try writeAttributes(attributes, of: record)
        return attributes
    }

    /// The items holding every one of `pairs`: one indexed query on the first pair's search
    /// tag, then each candidate is opened and checked against every pair (a search tag says
    /// nothing a row's sealed name and value do not confirm).
    func items(matching pairs: [Attribute]) throws(VaultError) -> [NodeRecord] {
        guard let first = pairs.first else { throw .invalidArgument("a search needs at least one attribute") }
        var found: [NodeRecord] = []
        var seen: Set<NodeID> = []
        for row in try storage.attributes(withSearchTag: cipher.attributeSearchTag(name: first.name, value: first.value)) {
            // An attribute of a missing node is verify's to report, not a match.
            guard seen.insert(row.node).inserted, let record = try record(row.node), record.kind == .item else { continue }
            let candidate = try open(row, of: record)
            guard candidate.name == first.name, candidate.value.hasSameBytes(as: first.value) else { continue }
            var matches = true
            for pair in pairs.dropFirst() {
                guard let value = try attributeValue(pair.name, of: record), value.hasSameBytes(as: pair.value) else {
                    matches = false
                    break
                }
            }
            if matches { found.append(record) }
        }
        return found
    }

    /// The path of `id`, every node on the way authenticated (names and attributes), and each
    /// on the way a dictionary. `known` keeps the paths found so far, so siblings share the walk.
    func path(of id: NodeID, known: inout [NodeID: VaultPath]) throws(VaultError) -> VaultPath {
        var chain: [(id: NodeID, name: ItemName)] = []
        var current = id
        var base = VaultPath.root
        while current != .root {
            if let path = known[current] {
                base = path
                break
            }
            guard chain.count < 100_000, let found = try recordAndName(current), let name = found.name else {
                throw .integrityFailure(describe(id) + " (its dictionary is missing)")
            }
            if !chain.isEmpty, found.record.kind != .dictionary { throw .integrityFailure(describe(id)) }
            chain.append((current, name))
            current = found.record.parent
        }
        if current == .root, known[.root] == nil {
            guard try existingRecord(.root).kind == .dictionary else { throw .integrityFailure("/") }
            known[.root] = .root
        }
        for (node, name) in chain.reversed() {
            base = base.appending(name)
            known[node] = base
        }
        return base
    }
}
