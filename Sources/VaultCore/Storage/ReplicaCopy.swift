import StoragePostgres
import StorageSQLite

/// Brings an offline replica (a SQLite vault file) to a vault's records as its server holds
/// them, through the storage protocol on both sides: the rows are the server's ciphertext byte
/// for byte, so NodeStore authenticates the replica exactly as it does the server (every
/// record's associated data names the vault id, the node and its incarnation, never the engine
/// or the location). One snapshot of the server, one transaction of the replica: the replica is
/// always the whole vault at one generation, never a mix.
///
/// What is read each time is the vault's row (one statement, which ends the work when the
/// replica is at that generation already), then every node row and every attribute row (two
/// statements); contents and blocks only of nodes whose row differs. A write always changes
/// its node's row (a content's generation is sealed in its attributes), so a node whose row
/// is the same holds the same content. The access log is not copied: a mount logs to the
/// server only, and nothing offline reads it.
enum ReplicaCopy {
    /// A node to store in the replica, with what the server holds for it.
    private struct Node {
        let row: NodeRow
        let content: [UInt8]?
        let blocks: [ContentBlockRow]
    }

    /// What differs between the server's snapshot and the replica.
    private struct Plan {
        let version: Int
        let header: VaultHeader
        let nextNodeID: NodeID
        let state: VaultState
        var removed: [NodeID] = []
        var put: [Node] = []
        var attributesRemoved: [(NodeID, [UInt8])] = []
        var attributesPut: [AttributeRow] = []
        var rules: [RuleRow] = []
        var keySlots: [KeySlotRow] = []
        var memberSlots: [MemberSlotRow] = []
        var pinSlots: [PINSlotRow] = []
    }

    /// Copies what differs; false when the replica was at the server's generation already.
    /// A server at an older generation than a replica whose state `cipher` authenticates is
    /// `.rolledBack` (unless `accepting`), and the replica is left as it was: it holds the
    /// newer vault. Without a cipher (a locked vault) such a replica cannot be told from one
    /// edited by hand, so it is left alone too, without a verdict.
    static func refresh(from server: PostgresStorage, into replica: SQLiteStorage, cipher: RecordCipher?, accepting: Bool,
                        shown: String) throws(VaultError) -> Bool {
        guard let plan = try plan(from: server, replica: replica, cipher: cipher, accepting: accepting, shown: shown) else { return false }
        try replica.write(.durable) { () throws(VaultError) in try apply(plan, to: replica) }
        return true
    }

    /// A new replica's records, inside the transaction that creates its file.
    static func fill(_ replica: SQLiteStorage, from server: PostgresStorage, shown: String) throws(VaultError) {
        guard let plan = try plan(from: server, replica: replica, cipher: nil, accepting: true, shown: shown) else { return }
        try apply(plan, to: replica)
    }

    /// What differs, read in one snapshot of the server; nil when nothing is to be copied.
    private static func plan(from server: PostgresStorage, replica: SQLiteStorage, cipher: RecordCipher?, accepting: Bool,
                             shown: String) throws(VaultError) -> Plan? {
        let local = try? replica.vaultState()
        let localHeader = try? replica.header()
        // Afresh: the rows the connection remembers may be older than a replica another
        // process copied a moment ago, which would look like a server rolled back.
        let planned = try server.readAfresh { () throws(VaultError) -> Plan? in
            guard let state = try server.vaultState(), let header = try server.header(), let next = try server.nextNodeID() else {
                throw .integrityFailure("vault header (missing on the server)")
            }
            if let local, let localHeader, local.generation == state.generation, local.stateMAC == state.stateMAC,
               localHeader.mac == header.mac, (try? replica.nextNodeID()) == next {
                return nil
            }
            if let local, local.generation > state.generation, !accepting {
                if let cipher, cipher.stateMACMatches(local) {
                    throw .rolledBack(path: shown, found: state.generation, newest: local.generation)
                }
                // Unverifiable without the key: neither believed nor overwritten.
                if cipher == nil { return nil }
            }
            let version = try server.formatVersion()
            var plan = Plan(version: version, header: header, nextNodeID: next, state: state)
            var mine: [NodeID: NodeRow] = [:]
            for stored in (try? replica.everyNode()) ?? [] {
                if case .row(let row, _) = stored { mine[row.id] = row }
            }
            for stored in try server.everyNode() {
                guard case .row(let row, let hasContent) = stored else {
                    throw .integrityFailure("a node row on the server (malformed), not copied to the replica")
                }
                if let held = mine.removeValue(forKey: row.id) {
                    if same(held, row) { continue }
                    plan.removed.append(row.id)
                }
                let isItem = row.kind == NodeKind.item.rawValue
                plan.put.append(Node(row: row, content: hasContent ? try server.sealedContent(of: row.id) : nil,
                                     blocks: isItem ? try server.contentBlocks(of: row.id, in: 0..<Int.max) : []))
            }
            plan.removed += mine.keys
            var attributes: [AttributeKey: AttributeRow] = [:]
            for stored in (try? replica.everyAttribute()) ?? [] {
                if case .row(let row) = stored { attributes[AttributeKey(row)] = row }
            }
            for stored in try server.everyAttribute() {
                guard case .row(let row) = stored else {
                    throw .integrityFailure("an attribute row on the server (malformed), not copied to the replica")
                }
                if let held = attributes.removeValue(forKey: AttributeKey(row)), held.searchTag == row.searchTag,
                   held.sealedName == row.sealedName, held.sealedValue == row.sealedValue { continue }
                plan.attributesPut.append(row)
            }
            plan.attributesRemoved = attributes.values.map { ($0.node, $0.tag) }
            plan.rules = try server.ruleRows()
            plan.keySlots = try server.keySlots()
            if version >= VaultFormat.oldestWithMembers { plan.memberSlots = try server.memberSlots() }
            if version >= VaultFormat.oldestWithPINSlots { plan.pinSlots = try server.pinSlots() }
            return plan
        }
        return planned
    }

    /// Stores `plan` in the replica, inside its write transaction.
    private static func apply(_ plan: Plan, to replica: SQLiteStorage) throws(VaultError) {
        for id in plan.removed { try replica.deleteNode(id) }
        for node in plan.put {
            try replica.insertNode(node.row, sealedContent: node.content)
            for block in node.blocks { try replica.upsertContentBlock(block, of: node.row.id) }
        }
        for (node, tag) in plan.attributesRemoved { _ = try replica.deleteAttribute(of: node, tag: tag) }
        for row in plan.attributesPut { try replica.upsertAttribute(row) }
        let rules = Set(plan.rules.map(\.node))
        for row in try replica.ruleRows() where !rules.contains(row.node) { _ = try replica.deleteRule(of: row.node) }
        for row in plan.rules { try replica.upsertRule(row) }
        let slots = Set(plan.keySlots.map(\.id))
        for slot in try replica.keySlots() where !slots.contains(slot.id) { _ = try replica.deleteKeySlot(id: slot.id) }
        for slot in plan.keySlots { try replica.upsertKeySlot(slot) }
        if plan.version >= VaultFormat.oldestWithMembers {
            for slot in try replica.memberSlots() { _ = try replica.deleteMemberSlot(named: slot.name) }
            for slot in plan.memberSlots { try replica.insertMemberSlot(slot) }
        }
        if plan.version >= VaultFormat.oldestWithPINSlots {
            for slot in try replica.pinSlots() { _ = try replica.deletePINSlot(id: slot.id) }
            for slot in plan.pinSlots { try replica.upsertPINSlot(slot) }
        }
        try replica.setFormatVersion(plan.version)
        try replica.replicateVaultRow(plan.header, nextNodeID: plan.nextNodeID, state: plan.state)
    }

    private static func same(_ a: NodeRow, _ b: NodeRow) -> Bool {
        a.parent == b.parent && a.kind == b.kind && a.incarnation == b.incarnation && a.nameTag == b.nameTag
            && a.sealedName == b.sealedName && a.sealedAttributes == b.sealedAttributes
    }

    private struct AttributeKey: Hashable {
        let node: Int64
        let tag: [UInt8]
        init(_ row: AttributeRow) {
            node = row.node.rawValue
            tag = row.tag
        }
    }
}
