/// A node's row without its content column (contents are loaded only when read).
struct NodeRecord {
    let id: NodeID
    let parent: NodeID
    let kind: NodeKind
    let sealedName: [UInt8]
    let sealedAttributes: [UInt8]
}

/// The node operations on one connection with one set of keys, each a step inside a
/// transaction the caller opened. Every record read is authenticated here before use.
struct NodeStore {
    let db: SQLiteConnection
    let cipher: RecordCipher

    private static let columns = "id, parent, kind, name, attributes"

    private func decodeRecord(_ row: [SQLValue]) throws(VaultError) -> NodeRecord {
        guard let id = row[0].integer, let parent = row[1].integer, let kindValue = row[2].integer,
              let name = row[3].blob, let attributes = row[4].blob else {
            throw .integrityFailure("record \(row.first?.integer.map(String.init) ?? "?") (malformed row)")
        }
        guard let kind = NodeKind(rawValue: kindValue) else {
            throw .integrityFailure(describe(NodeID(id)) + " (unknown kind)")
        }
        return NodeRecord(id: NodeID(id), parent: NodeID(parent), kind: kind, sealedName: name, sealedAttributes: attributes)
    }

    func record(_ id: NodeID) throws(VaultError) -> NodeRecord? {
        guard let row = try db.row("SELECT \(NodeStore.columns) FROM nodes WHERE id = ?", [.integer(id.rawValue)]) else {
            return nil
        }
        return try decodeRecord(row)
    }

    func existingRecord(_ id: NodeID) throws(VaultError) -> NodeRecord {
        guard let record = try record(id) else { throw .notFound(id == .root ? "/" : "node \(id)") }
        return record
    }

    func attributes(of record: NodeRecord) throws(VaultError) -> NodeAttributes {
        guard let attributes = cipher.openAttributes(record.sealedAttributes, node: record.id),
              attributes.kind == record.kind else {
            throw .integrityFailure(describe(record.id))
        }
        return attributes
    }

    func node(_ record: NodeRecord) throws(VaultError) -> Node {
        Node(id: record.id, parent: record.parent, attributes: try attributes(of: record))
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
        let tag = cipher.tag(for: name, in: parent)
        guard let row = try db.row("SELECT \(NodeStore.columns) FROM nodes WHERE parent = ? AND name_tag = ?",
                                   [.integer(parent.rawValue), .blob(tag)]) else { return nil }
        let record = try decodeRecord(row)
        guard cipher.openName(record.sealedName, node: record.id, parent: parent) == name else {
            throw .integrityFailure(describe(parent, appending: name))
        }
        return record
    }

    func children(of parent: NodeID) throws(VaultError) -> [(name: ItemName, record: NodeRecord)] {
        var result: [(name: ItemName, record: NodeRecord)] = []
        var failure: VaultError?
        try db.query("SELECT \(NodeStore.columns) FROM nodes WHERE parent = ? AND id != parent", [.integer(parent.rawValue)]) {
            (row) throws(VaultError) in
            let record = try decodeRecord(row)
            guard let name = cipher.openName(record.sealedName, node: record.id, parent: parent) else {
                failure = failure ?? .integrityFailure(describe(parent) + "/<entry \(record.id.rawValue)>")
                return
            }
            result.append((name, record))
        }
        if let failure { throw failure }
        return result
    }

    func hasChildren(_ id: NodeID) throws(VaultError) -> Bool {
        try db.row("SELECT 1 FROM nodes WHERE parent = ? AND id != parent LIMIT 1", [.integer(id.rawValue)]) != nil
    }

    func content(of record: NodeRecord, attributes: NodeAttributes) throws(VaultError) -> SecureBuffer {
        guard let sealed = try db.row("SELECT content FROM nodes WHERE id = ?", [.integer(record.id.rawValue)])?.first?.blob,
              let content = try cipher.openContent(sealed, node: record.id, generation: attributes.contentGeneration,
                                                   expectedCount: attributes.size) else {
            throw .integrityFailure(describe(record.id))
        }
        return content
    }

    // MARK: writes

    func allocateID() throws(VaultError) -> NodeID {
        // Ids are never reused, so an old ciphertext can never become valid for a new node.
        guard let id = try db.row("UPDATE vault SET next_node_id = next_node_id + 1 WHERE singleton = 1 RETURNING next_node_id - 1")?.first?.integer else {
            throw .integrityFailure("vault header (missing)")
        }
        return NodeID(id)
    }

    func insert(id: NodeID, name: ItemName, parent: NodeID, attributes: NodeAttributes, sealedContent: [UInt8]?) throws(VaultError) {
        try db.run("INSERT INTO nodes (id, parent, kind, name_tag, name, attributes, content) VALUES (?, ?, ?, ?, ?, ?, ?)", [
            .integer(id.rawValue), .integer(parent.rawValue), .integer(attributes.kind.rawValue),
            .blob(cipher.tag(for: name, in: parent)), .blob(cipher.sealName(name, node: id, parent: parent)),
            .blob(cipher.sealAttributes(attributes, node: id)), sealedContent.map(SQLValue.blob) ?? .null,
        ])
    }

    func writeAttributes(_ attributes: NodeAttributes, of id: NodeID) throws(VaultError) {
        try db.run("UPDATE nodes SET attributes = ? WHERE id = ?",
                   [.blob(cipher.sealAttributes(attributes, node: id)), .integer(id.rawValue)])
    }

    func writeContent(_ content: borrowing SecureBuffer, of id: NodeID, attributes: inout NodeAttributes,
                      modified: Timestamp) throws(VaultError) {
        attributes.contentGeneration += 1
        attributes.size = content.count
        attributes.modified = modified
        attributes.changed = Timestamp.now()
        let sealed = try cipher.sealContent(content, node: id, generation: attributes.contentGeneration)
        try db.run("UPDATE nodes SET attributes = ?, content = ? WHERE id = ?",
                   [.blob(cipher.sealAttributes(attributes, node: id)), .blob(sealed), .integer(id.rawValue)])
    }

    /// Moves a node under a new parent and name; its content is untouched.
    func relink(_ id: NodeID, to parent: NodeID, as name: ItemName, attributes: NodeAttributes) throws(VaultError) {
        try db.run("UPDATE nodes SET parent = ?, name_tag = ?, name = ?, attributes = ? WHERE id = ?", [
            .integer(parent.rawValue), .blob(cipher.tag(for: name, in: parent)),
            .blob(cipher.sealName(name, node: id, parent: parent)),
            .blob(cipher.sealAttributes(attributes, node: id)), .integer(id.rawValue),
        ])
    }

    func delete(_ id: NodeID) throws(VaultError) {
        try db.run("DELETE FROM nodes WHERE id = ?", [.integer(id.rawValue)])
    }

    func deleteSubtree(_ id: NodeID) throws(VaultError) {
        try db.run("""
            WITH RECURSIVE subtree(id) AS (
                SELECT ? UNION SELECT nodes.id FROM nodes JOIN subtree ON nodes.parent = subtree.id
            )
            DELETE FROM nodes WHERE id IN subtree
            """, [.integer(id.rawValue)])
    }

    /// A dictionary's modification time follows changes to its entries, as on any filesystem.
    func touch(_ id: NodeID, at time: Timestamp) throws(VaultError) {
        var attributes = try attributes(of: try existingRecord(id))
        attributes.modified = time
        attributes.changed = time
        try writeAttributes(attributes, of: id)
    }

    /// Whether `ancestor` is `id` or one of its ancestors.
    func isAncestor(_ ancestor: NodeID, of id: NodeID) throws(VaultError) -> Bool {
        var current = id
        var steps = 0
        while true {
            if current == ancestor { return true }
            if current == .root { return false }
            guard let record = try record(current) else { return false }
            current = record.parent
            steps += 1
            if steps > 100_000 { throw .integrityFailure("dictionary tree (cycle at \(id))") }
        }
    }

    // MARK: paths for messages

    /// A readable path for `id`, as far as its ancestors decrypt; for error messages only.
    func describe(_ id: NodeID) -> String {
        var parts: [String] = []
        var current = id
        while current != .root, parts.count < 256 {
            guard let row = try? db.row("SELECT parent, name FROM nodes WHERE id = ?", [.integer(current.rawValue)]),
                  let parent = row[0].integer, let sealed = row[1].blob else {
                parts.append("<record \(current.rawValue)>")
                break
            }
            if let name = cipher.openName(sealed, node: current, parent: NodeID(parent)) {
                parts.append(name.description)
            } else {
                parts.append("<record \(current.rawValue)>")
            }
            current = NodeID(parent)
        }
        return parts.isEmpty ? "/" : parts.reversed().joined(separator: "/")
    }

    func describe(_ parent: NodeID, appending name: ItemName) -> String {
        parent == .root ? name.description : describe(parent) + "/" + name.description
    }
}
