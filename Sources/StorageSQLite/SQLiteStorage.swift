import VaultStorageKit
import Glibc
import SystemCalls
import SystemPackage

/// A vault in one SQLite file: the header in a singleton row, the format version in
/// `user_version`, one row per node and one per attribute of a node. The file is checked and
/// created here; what its records mean is NodeStore's business.
package final class SQLiteStorage: VaultStorage, @unchecked Sendable {
    private let db: SQLiteConnection
    /// Whether the file is known to be in WAL mode (see `write`).
    private var journalIsWAL: Bool
    /// A descriptor of our own on the WAL, for `syncAlongsideCommits`; -1 until the first.
    /// Used by the one thread that syncs alongside commits (`Vault.syncing`), closed at deinit.
    private var walDescriptor: Int32 = -1

    deinit {
        if walDescriptor >= 0 { close(walDescriptor) }
    }

    private init(db: SQLiteConnection, journalIsWAL: Bool) {
        self.db = db
        self.journalIsWAL = journalIsWAL
    }

    package var path: String { db.path }

    // MARK: the vault file

    /// Creates a vault file (0600, parent directories 0700) and its tables, and runs `populate`
    /// in the same durable transaction. Refuses to touch an existing file; removes what it
    /// created if any step fails.
    package static func create(at path: String, _ populate: (SQLiteStorage) throws(VaultError) -> Void) throws(VaultError) -> SQLiteStorage {
        try VaultFiles.createParentDirectories(of: path)
        try VaultFiles.createEmptyPrivateFile(path)
        do {
            let db = try SQLiteConnection(path: path, create: false)
            // Only before the first table: pages freed by removals can then be given back
            // (`reclaimFreeSpace`). Older vaults are converted when they first have some.
            try db.execute("PRAGMA auto_vacuum = INCREMENTAL")
            try db.execute("PRAGMA journal_mode = WAL")
            try db.execute(SQLiteSchema.connectionPragmas)
            let storage = SQLiteStorage(db: db, journalIsWAL: true)
            try storage.write(.durable) { () throws(VaultError) in
                try db.execute("PRAGMA application_id = \(VaultFormat.applicationID)")
                try db.execute(SQLiteSchema.tables)
                try populate(storage)
            }
            try VaultFiles.syncDirectory(containing: path)
            return storage
        } catch {
            VaultFiles.removeVaultFiles(path)
            throw error
        }
    }

    /// Opens the vault file at `path`, refusing what is not one. Writes nothing: the format
    /// version is the caller's to judge, and the switch to WAL waits for the first write, so a
    /// vault can be checked (or refused for its version) without being changed.
    package static func open(at path: String) throws(VaultError) -> SQLiteStorage {
        var info = stat()
        guard stat(path, &info) == 0 else {
            let error = Errno.last
            if error == .noSuchFileOrDirectory { throw .vaultNotFound(path) }
            throw .storageFailure("\(path): \(error)")
        }
        switch info.st_mode & S_IFMT {
        case S_IFDIR: throw .notAVault(path: path, reason: "it is a directory")
        case S_IFREG: break
        default: throw .notAVault(path: path, reason: "it is not a regular file")
        }
        guard info.st_size > 0 else { throw .notAVault(path: path, reason: "the file is empty") }
        let db = try SQLiteConnection(path: path, create: false)
        let applicationID = try db.integer("PRAGMA application_id")
        guard applicationID == Int64(VaultFormat.applicationID) else {
            throw .notAVault(path: path, reason: "an SQLite database of another application")
        }
        try db.execute(SQLiteSchema.connectionPragmas)
        return SQLiteStorage(db: db, journalIsWAL: false)
    }

    // MARK: transactions

    package func write<R: ~Copyable>(_ durability: CommitDurability, seenByChangeToken: Bool,
                             _ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        // Outside any transaction: SQLite cannot change the journal mode inside one.
        if !journalIsWAL {
            if try db.row("PRAGMA journal_mode")?.first?.blob != Array("wal".utf8) {
                try db.execute("PRAGMA journal_mode = WAL")
            }
            journalIsWAL = true
        }
        var sealed: Int64? = nil
        sealedPartsChanged = false
        defer { sealedPartsChanged = false }
        let result = try db.writeTransaction(durable: durability == .durable, counted: seenByChangeToken) { () throws(VaultError) -> R in
            let result = try body()
            // Local statements: the generation costs no round trip here, and commits with the rest.
            if let cipher = generationCipher {
                // Looked at until it holds: a vault's format only ever goes up (an upgrade's write).
                if !hasGeneration { hasGeneration = try formatVersion() >= VaultFormat.oldestWithGeneration }
                if hasGeneration { sealed = try sealNextGeneration(cipher) }
            }
            return result
        }
        if let sealed { lastSealedGeneration = sealed }
        return result
    }

    package func read<R: ~Copyable>(_ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        try db.readTransaction(body)
    }

    package func statements<R: ~Copyable>(_ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        try db.readTransaction(body)
    }

    package func syncCarriedCommits() throws(VaultError) {
        // Before the first write the file may still be in rollback mode, whose commits are all
        // durable: there is no WAL to sync.
        guard journalIsWAL else { return }
        try db.syncWAL()
    }

    package var syncsAlongsideCommits: Bool { journalIsWAL }

    /// Free pages below this many (256 KiB) are left for the next writes to reuse.
    static let reclaimMinimumPages: Int64 = 64
    /// Pages given back per transaction (8 MiB).
    static let reclaimStepPages: Int64 = 2048
    /// A WAL larger than this is truncated when the mount is idle (`trimmingLog`).
    static let idleLogLimit = 256 << 10
    /// Set once converting a vault made without auto_vacuum failed other than for another
    /// process's lock (a full disk, say): not tried again by this connection, each try
    /// rewriting the file.
    private var conversionFailed = false

    /// Once the free pages are 256 KiB and an eighth of the file, they go back to the
    /// filesystem (`incremental_vacuum`, which moves pages from the end into the free ones and
    /// truncates), so the file is never more than about 8/7 of what it holds; a smaller share
    /// is left for writes to reuse, rather than shrink and grow the file under steady rewriting.
    /// `reclaimStepPages` at a time, each step one transaction followed by a checkpoint, so the
    /// WAL never holds more than a step (one step for the 2.6 GB left by mixed work took the
    /// WAL to 86 MB). A vault made before auto_vacuum is converted the first time (a VACUUM,
    /// which needs the vault's size again for a while, in SQLite's temporary file: a copy of
    /// the live records' ciphertext, nothing removed or replaced). The WAL is
    /// truncated at the end, so what was given back is not held there. With `trimmingLog` (the
    /// mount is idle), a WAL of more than `idleLogLimit` is truncated as well:
    /// `journal_size_limit` keeps up to 4 MiB of it between commits, the room a large item's
    /// store needs on a full disk, which would otherwise outweigh a small vault for good.
    /// Nobody waits: another process's lock leaves the work to the next call.
    package func reclaimFreeSpace(trimmingLog: Bool, continuing: Bool) throws(VaultError) -> Bool {
        guard journalIsWAL else { return false }
        let free = try db.integer("PRAGMA freelist_count")
        let pages = try db.integer("PRAGMA page_count")
        let due = free >= SQLiteStorage.reclaimMinimumPages && free * 8 >= pages
        let incremental = try db.integer("PRAGMA auto_vacuum") == 2
        return try db.withoutWaiting { () throws(VaultError) -> Bool in
            guard continuing || due, incremental || !conversionFailed else {
                var wal = stat()
                if continuing || (trimmingLog && stat(path + "-wal", &wal) == 0 && wal.st_size > SQLiteStorage.idleLogLimit) {
                    try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                }
                return false
            }
            guard incremental else {
                do throws(VaultError) {
                    try db.execute("PRAGMA auto_vacuum = INCREMENTAL; VACUUM")
                } catch .vaultInUse(let path) {
                    throw .vaultInUse(path)
                } catch {
                    conversionFailed = true
                    throw error
                }
                try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                return false
            }
            try db.writeTransaction(durable: false, counted: false) { () throws(VaultError) in
                try db.execute("PRAGMA incremental_vacuum(\(SQLiteStorage.reclaimStepPages))")
            }
            guard free > SQLiteStorage.reclaimStepPages else {
                try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                return false
            }
            try db.execute("PRAGMA wal_checkpoint(PASSIVE)")
            return true
        }
    }

    /// fdatasync of the WAL through a descriptor of our own: what a synchronous=FULL commit's
    /// sync does (SQLite's unix VFS syncs with fdatasync), on the same file, so it takes along
    /// every frame written before it, while this connection goes on appending others. The WAL
    /// is the file's for as long as this connection is open (only the last connection to close
    /// removes it), and a checkpoint that reset it had synced it first. The first time, the
    /// directory too, as SQLite does after creating the WAL.
    /// One machine's: another process's change (the command line) reaches an open item only
    /// through this machine's own calls.
    package var isShared: Bool { false }

    package func syncAlongsideCommits() throws(VaultError) {
        let wal = path + "-wal"
        if walDescriptor < 0 {
            let opened: Int32
            do {
                opened = try SystemCall.retrying { Glibc.open(wal, O_RDONLY | O_CLOEXEC) }
            } catch {
                throw .storageFailure("cannot open \(wal) to sync it: \(error)")
            }
            do throws(VaultError) {
                try VaultFiles.syncDirectory(containing: wal)
            } catch {
                close(opened)
                throw error
            }
            walDescriptor = opened
        }
        do {
            try SystemCall.retrying { fdatasync(walDescriptor) }
        } catch .noSpace, .diskQuotaExceeded {
            throw .diskFull
        } catch {
            throw .storageFailure("cannot sync \(wal): \(error)")
        }
    }

    package func changeToken() throws(VaultError) -> StorageChangeToken {
        // data_version counts only other connections' commits; ours are counted apart.
        StorageChangeToken(Int64(db.commits), try db.dataVersion())
    }

    package func othersChangeToken() throws(VaultError) -> StorageChangeToken {
        StorageChangeToken(try db.dataVersion())
    }

    // MARK: format

    package func formatVersion() throws(VaultError) -> Int {
        Int(try db.integer("PRAGMA user_version"))
    }

    package func setFormatVersion(_ version: Int) throws(VaultError) {
        // user_version lives in the database header page, so it commits with the transaction.
        try db.execute("PRAGMA user_version = \(version)")
    }

    package func prepareStorage(forFormatVersion version: Int) throws(VaultError) {
        if let migration = SQLiteSchema.migrations[version] { try db.execute(migration) }
    }

    // MARK: header

    package func insertHeader(_ header: VaultHeader, firstNodeID: NodeID) throws(VaultError) {
        try db.run("INSERT INTO vault (singleton, vault_id, item_size_limit, next_node_id, header_mac) VALUES (1, ?, ?, ?, ?)",
                   [.blob(header.vaultID), .integer(Int64(header.itemSizeLimit)), .integer(firstNodeID.rawValue), .blob(header.mac)])
    }

    package func header() throws(VaultError) -> VaultHeader? {
        guard let row = try db.row("SELECT vault_id, item_size_limit, header_mac FROM vault WHERE singleton = 1"),
              let vaultID = row[0].blob, let limit = row[1].integer, let mac = row[2].blob else { return nil }
        return VaultHeader(vaultID: vaultID, itemSizeLimit: Int(limit), mac: mac)
    }

    package func updateHeaderMAC(_ mac: [UInt8]) throws(VaultError) {
        guard try db.run("UPDATE vault SET header_mac = ? WHERE singleton = 1", [.blob(mac)]) == 1 else {
            throw .integrityFailure("vault header (missing)")
        }
        sealedPartsChanged = true
    }

    // MARK: generation

    package var generationCipher: (any GenerationSealer)?
    package private(set) var lastSealedGeneration: Int64?
    package private(set) var sealedPartsChanged = false
    /// Whether the vault is known to be of format 8 or later (`write`).
    private var hasGeneration = false

    package func vaultState() throws(VaultError) -> VaultState? {
        guard let row = try db.row("SELECT generation, header_mac, rules_mac, members_mac, state_mac FROM vault WHERE singleton = 1"),
              let generation = row[0].integer, let header = row[1].blob else { return nil }
        return VaultState(generation: generation, headerMAC: header, rulesMAC: row[2].blob, membersMAC: row[3].blob, stateMAC: row[4].blob)
    }

    package func setMembersMAC(_ mac: [UInt8]) throws(VaultError) {
        guard try db.run("UPDATE vault SET members_mac = ? WHERE singleton = 1", [.blob(mac)]) == 1 else {
            throw .integrityFailure("vault header (missing)")
        }
        sealedPartsChanged = true
    }

    package func raiseGeneration(sealedBy cipher: any GenerationSealer) throws(VaultError) {
        lastSealedGeneration = try sealNextGeneration(cipher)
    }

    private func sealNextGeneration(_ cipher: any GenerationSealer) throws(VaultError) -> Int64 {
        guard let row = try db.row("UPDATE vault SET generation = generation + 1 WHERE singleton = 1 "
                                       + "RETURNING generation, header_mac, rules_mac, members_mac"),
              let generation = row[0].integer, let header = row[1].blob else { throw .integrityFailure("vault header (missing)") }
        let state = VaultState(generation: generation, headerMAC: header, rulesMAC: row[2].blob, membersMAC: row[3].blob, stateMAC: nil)
        try db.run("UPDATE vault SET state_mac = ? WHERE singleton = 1", [.blob(cipher.stateMAC(state))])
        return generation
    }

    /// Sets the vault's row to another storage's, as that one holds it (an offline replica of
    /// a vault in PostgreSQL): the generation and its seal are copied, never raised or sealed
    /// here, so the replica authenticates exactly as the server's row did. Inside a `write`
    /// with no generation cipher set.
    package func replicateVaultRow(_ header: VaultHeader, nextNodeID: NodeID, state: VaultState) throws(VaultError) {
        try db.run("""
            INSERT OR REPLACE INTO vault (singleton, vault_id, item_size_limit, next_node_id, header_mac, rules_mac, generation,
                                          members_mac, state_mac)
            VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?)
            """, [.blob(header.vaultID), .integer(Int64(header.itemSizeLimit)), .integer(nextNodeID.rawValue), .blob(header.mac),
                  state.rulesMAC.map(SQLValue.blob) ?? .null, .integer(state.generation), state.membersMAC.map(SQLValue.blob) ?? .null,
                  state.stateMAC.map(SQLValue.blob) ?? .null])
    }

    package func allocateNodeID() throws(VaultError) -> NodeID {
        guard let id = try db.row("UPDATE vault SET next_node_id = next_node_id + 1 WHERE singleton = 1 RETURNING next_node_id - 1")?.first?.integer else {
            throw .integrityFailure("vault header (missing)")
        }
        return NodeID(id)
    }

    package func nextNodeID() throws(VaultError) -> NodeID? {
        try db.row("SELECT next_node_id FROM vault WHERE singleton = 1")?.first?.integer.map(NodeID.init)
    }

    // MARK: key slots

    package func keySlots() throws(VaultError) -> [KeySlotRow] {
        var slots: [KeySlotRow] = []
        try db.query("SELECT id, kdf_algorithm, kdf_opslimit, kdf_memlimit, salt, wrapped_master_key FROM key_slots ORDER BY id") {
            (row) throws(VaultError) in
            guard let id = row[0].integer, let algorithm = row[1].integer, let ops = row[2].integer,
                  let mem = row[3].integer, let salt = row[4].blob, let wrapped = row[5].blob else {
                throw .integrityFailure("key slot (malformed row)")
            }
            var parameters = KDFParameters(opsLimit: UInt64(bitPattern: ops), memLimit: UInt64(bitPattern: mem))
            parameters.algorithm = algorithm
            slots.append(KeySlotRow(id: id, parameters: parameters, salt: salt, wrappedMasterKey: wrapped))
        }
        return slots
    }

    package func upsertKeySlot(_ slot: KeySlotRow) throws(VaultError) {
        try db.run("INSERT OR REPLACE INTO key_slots (id, kdf_algorithm, kdf_opslimit, kdf_memlimit, salt, wrapped_master_key) VALUES (?, ?, ?, ?, ?, ?)", [
            .integer(slot.id), .integer(slot.parameters.algorithm), .integer(Int64(bitPattern: slot.parameters.opsLimit)),
            .integer(Int64(bitPattern: slot.parameters.memLimit)), .blob(slot.salt), .blob(slot.wrappedMasterKey),
        ])
    }

    package func deleteKeySlot(id: Int64) throws(VaultError) -> Bool {
        try db.run("DELETE FROM key_slots WHERE id = ?", [.integer(id)]) > 0
    }

    // MARK: TPM PIN slots

    package func pinSlots() throws(VaultError) -> [PINSlotRow] {
        var slots: [PINSlotRow] = []
        try db.query("SELECT id, kdf_algorithm, kdf_opslimit, kdf_memlimit, salt, pcr_mask, sealed_key, wrapped_master_key FROM pin_slots ORDER BY id") {
            (row) throws(VaultError) in
            guard let id = row[0].integer, let algorithm = row[1].integer, let ops = row[2].integer, let mem = row[3].integer,
                  let salt = row[4].blob, let mask = row[5].integer, let pcrMask = UInt32(exactly: mask),
                  let sealed = row[6].blob, let wrapped = row[7].blob else {
                throw .integrityFailure("TPM PIN slot (malformed row)")
            }
            var parameters = KDFParameters(opsLimit: UInt64(bitPattern: ops), memLimit: UInt64(bitPattern: mem))
            parameters.algorithm = algorithm
            slots.append(PINSlotRow(id: id, parameters: parameters, salt: salt, pcrMask: pcrMask, sealedKey: sealed, wrappedMasterKey: wrapped))
        }
        return slots
    }

    package func upsertPINSlot(_ slot: PINSlotRow) throws(VaultError) {
        try db.run("""
            INSERT OR REPLACE INTO pin_slots (id, kdf_algorithm, kdf_opslimit, kdf_memlimit, salt, pcr_mask, sealed_key, wrapped_master_key)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """, [
            .integer(slot.id), .integer(slot.parameters.algorithm), .integer(Int64(bitPattern: slot.parameters.opsLimit)),
            .integer(Int64(bitPattern: slot.parameters.memLimit)), .blob(slot.salt), .integer(Int64(slot.pcrMask)),
            .blob(slot.sealedKey), .blob(slot.wrappedMasterKey),
        ])
    }

    package func deletePINSlot(id: Int64) throws(VaultError) -> Bool {
        try db.run("DELETE FROM pin_slots WHERE id = ?", [.integer(id)]) > 0
    }

    // MARK: member slots

    package func memberSlots() throws(VaultError) -> [MemberSlotRow] {
        var slots: [MemberSlotRow] = []
        try db.query("SELECT name, public_key, sealed_master_key FROM member_slots ORDER BY name") { (row) throws(VaultError) in
            guard let name = row[0].blob, let publicKey = row[1].blob, let sealed = row[2].blob else {
                throw .integrityFailure("member slot (malformed row)")
            }
            slots.append(MemberSlotRow(name: name, publicKey: publicKey, sealedMasterKey: sealed))
        }
        return slots
    }

    package func insertMemberSlot(_ slot: MemberSlotRow) throws(VaultError) {
        // Checked first rather than mapped from a constraint error: the message names which.
        if try db.row("SELECT 1 FROM member_slots WHERE name = ? OR public_key = ?", [.blob(slot.name), .blob(slot.publicKey)]) != nil {
            throw .alreadyExists("member \(String(decoding: slot.name, as: UTF8.self)) or its public key")
        }
        try db.run("INSERT INTO member_slots (name, public_key, sealed_master_key) VALUES (?, ?, ?)",
                   [.blob(slot.name), .blob(slot.publicKey), .blob(slot.sealedMasterKey)])
    }

    package func deleteMemberSlot(named name: [UInt8]) throws(VaultError) -> Bool {
        try db.run("DELETE FROM member_slots WHERE name = ?", [.blob(name)]) > 0
    }

    // MARK: nodes

    private static let nodeColumns = "id, parent, kind, incarnation, name_tag, name, attributes"

    /// The first seven columns of `row` as a node row; nil when any is missing or mistyped.
    private static func nodeRow(_ row: [SQLValue]) -> NodeRow? {
        guard let id = row[0].integer, let parent = row[1].integer, let kind = row[2].integer, let incarnation = row[3].blob,
              let tag = row[4].blob, let name = row[5].blob, let attributes = row[6].blob else { return nil }
        return NodeRow(id: NodeID(id), parent: NodeID(parent), kind: kind, incarnation: incarnation, nameTag: tag,
                       sealedName: name, sealedAttributes: attributes)
    }

    private static func readableNodeRow(_ row: [SQLValue]) throws(VaultError) -> NodeRow {
        guard let node = nodeRow(row) else {
            throw .integrityFailure("record \(row.first?.integer.map(String.init) ?? "?") (malformed row)")
        }
        return node
    }

    package func node(_ id: NodeID) throws(VaultError) -> NodeRow? {
        guard let row = try db.row("SELECT \(SQLiteStorage.nodeColumns) FROM nodes WHERE id = ?", [.integer(id.rawValue)]) else {
            return nil
        }
        return try SQLiteStorage.readableNodeRow(row)
    }

    package func node(in parent: NodeID, nameTag: [UInt8]) throws(VaultError) -> NodeRow? {
        guard let row = try db.row("SELECT \(SQLiteStorage.nodeColumns) FROM nodes WHERE parent = ? AND name_tag = ?",
                                   [.integer(parent.rawValue), .blob(nameTag)]) else { return nil }
        return try SQLiteStorage.readableNodeRow(row)
    }

    package func children(of parent: NodeID) throws(VaultError) -> [NodeRow] {
        var rows: [NodeRow] = []
        try db.query("SELECT \(SQLiteStorage.nodeColumns) FROM nodes WHERE parent = ? AND id != parent", [.integer(parent.rawValue)]) {
            (row) throws(VaultError) in rows.append(try SQLiteStorage.readableNodeRow(row))
        }
        return rows
    }

    package func hasChildren(_ parent: NodeID) throws(VaultError) -> Bool {
        try db.row("SELECT 1 FROM nodes WHERE parent = ? AND id != parent LIMIT 1", [.integer(parent.rawValue)]) != nil
    }

    package func parent(of id: NodeID) throws(VaultError) -> NodeID? {
        try db.row("SELECT parent FROM nodes WHERE id = ?", [.integer(id.rawValue)])?.first?.integer.map(NodeID.init)
    }

    package func everyNode() throws(VaultError) -> [StoredNode] {
        var nodes: [StoredNode] = []
        try db.query("SELECT \(SQLiteStorage.nodeColumns), content IS NOT NULL FROM nodes ORDER BY id") { (row) throws(VaultError) in
            if let node = SQLiteStorage.nodeRow(row), let hasContent = row[7].integer {
                nodes.append(.row(node, hasContent: hasContent == 1))
            } else {
                nodes.append(.malformed(id: row[0].integer))
            }
        }
        return nodes
    }

    package func itemCount() throws(VaultError) -> Int {
        Int(try db.integer("SELECT count(*) FROM nodes WHERE kind = \(NodeKind.item.rawValue)"))
    }

    package func sealedContent(of id: NodeID) throws(VaultError) -> [UInt8]? {
        try db.row("SELECT content FROM nodes WHERE id = ?", [.integer(id.rawValue)])?.first?.blob
    }

    /// One statement, so one snapshot without a BEGIN and COMMIT around it: an open costs one
    /// step here instead of four.
    package func nodeAndContent(_ id: NodeID) throws(VaultError) -> (row: NodeRow, sealedContent: [UInt8]?)? {
        guard let row = try db.row("SELECT \(SQLiteStorage.nodeColumns), content FROM nodes WHERE id = ?", [.integer(id.rawValue)]) else {
            return nil
        }
        return (try SQLiteStorage.readableNodeRow(row), row.count > 7 ? row[7].blob : nil)
    }

    package func insertNode(_ row: NodeRow, sealedContent: [UInt8]?) throws(VaultError) {
        try db.run("INSERT INTO nodes (id, parent, kind, incarnation, name_tag, name, attributes, content) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [
            .integer(row.id.rawValue), .integer(row.parent.rawValue), .integer(row.kind), .blob(row.incarnation),
            .blob(row.nameTag), .blob(row.sealedName), .blob(row.sealedAttributes), sealedContent.map(SQLValue.blob) ?? .null,
        ])
    }

    package func updateAttributes(of id: NodeID, sealedAttributes: [UInt8]) throws(VaultError) {
        try db.run("UPDATE nodes SET attributes = ? WHERE id = ?", [.blob(sealedAttributes), .integer(id.rawValue)])
    }

    package func updateAttributesAndContent(of id: NodeID, sealedAttributes: [UInt8], sealedContent: [UInt8]) throws(VaultError) {
        try db.run("UPDATE nodes SET attributes = ?, content = ? WHERE id = ?",
                   [.blob(sealedAttributes), .blob(sealedContent), .integer(id.rawValue)])
    }

    package func relink(_ id: NodeID, to parent: NodeID, nameTag: [UInt8], sealedName: [UInt8],
                sealedAttributes: [UInt8]) throws(VaultError) {
        try db.run("UPDATE nodes SET parent = ?, name_tag = ?, name = ?, attributes = ? WHERE id = ?", [
            .integer(parent.rawValue), .blob(nameTag), .blob(sealedName), .blob(sealedAttributes), .integer(id.rawValue),
        ])
    }

    package func deleteNode(_ id: NodeID) throws(VaultError) {
        try deleteContentBlocks(of: id, from: 0)
        _ = try db.run("DELETE FROM nodes WHERE id = ?", [.integer(id.rawValue)])
    }

    package func deleteSubtree(_ id: NodeID) throws(VaultError) {
        let subtree = """
            WITH RECURSIVE subtree(id) AS (
                SELECT ? UNION SELECT nodes.id FROM nodes JOIN subtree ON nodes.parent = subtree.id
            )
            """
        _ = try db.run(subtree + "DELETE FROM content_blocks WHERE node IN subtree", [.integer(id.rawValue)])
        _ = try db.run(subtree + "DELETE FROM nodes WHERE id IN subtree", [.integer(id.rawValue)])
    }

    // MARK: content blocks

    package func contentBlocks(of id: NodeID, in range: Range<Int>) throws(VaultError) -> [ContentBlockRow] {
        var rows: [ContentBlockRow] = []
        try db.query("SELECT idx, sealed FROM content_blocks WHERE node = ? AND idx >= ? AND idx < ? ORDER BY idx",
                     [.integer(id.rawValue), .integer(Int64(range.lowerBound)), .integer(Int64(range.upperBound))]) {
            (row) throws(VaultError) in
            guard let index = row[0].integer, let sealed = row[1].blob else {
                throw .integrityFailure("record \(id.rawValue) (malformed content block)")
            }
            rows.append(ContentBlockRow(index: Int(index), sealed: sealed))
        }
        return rows
    }

    package func upsertContentBlock(_ row: ContentBlockRow, of id: NodeID) throws(VaultError) {
        _ = try db.run("INSERT INTO content_blocks (node, idx, sealed) VALUES (?, ?, ?) ON CONFLICT (node, idx) DO UPDATE SET sealed = excluded.sealed",
                   [.integer(id.rawValue), .integer(Int64(row.index)), .blob(row.sealed)])
    }

    package func deleteContentBlocks(of id: NodeID, from index: Int) throws(VaultError) {
        _ = try db.run("DELETE FROM content_blocks WHERE node = ? AND idx >= ?", [.integer(id.rawValue), .integer(Int64(index))])
    }

    package func orphanContentBlockCount() throws(VaultError) -> Int {
        Int(try db.integer("SELECT count(*) FROM content_blocks WHERE node NOT IN (SELECT id FROM nodes)"))
    }

    // MARK: a node's attributes

    private static let attributeColumns = "node, tag, search_tag, name, value"

    private static func attributeRow(_ row: [SQLValue]) -> AttributeRow? {
        guard let node = row[0].integer, let tag = row[1].blob, let searchTag = row[2].blob, let name = row[3].blob,
              let value = row[4].blob else { return nil }
        return AttributeRow(node: NodeID(node), tag: tag, searchTag: searchTag, sealedName: name, sealedValue: value)
    }

    private func attributeRows(_ sql: String, _ arguments: [SQLValue]) throws(VaultError) -> [AttributeRow] {
        var rows: [AttributeRow] = []
        try db.query(sql, arguments) { (row) throws(VaultError) in
            guard let attribute = SQLiteStorage.attributeRow(row) else {
                throw .integrityFailure("an attribute of record \(row[0].integer.map(String.init) ?? "?") (malformed row)")
            }
            rows.append(attribute)
        }
        return rows
    }

    package func attribute(of node: NodeID, tag: [UInt8]) throws(VaultError) -> AttributeRow? {
        try attributeRows("SELECT \(SQLiteStorage.attributeColumns) FROM attributes WHERE node = ? AND tag = ?",
                          [.integer(node.rawValue), .blob(tag)]).first
    }

    package func attributes(of node: NodeID) throws(VaultError) -> [AttributeRow] {
        try attributeRows("SELECT \(SQLiteStorage.attributeColumns) FROM attributes WHERE node = ?", [.integer(node.rawValue)])
    }

    package func attributes(withSearchTag searchTag: [UInt8]) throws(VaultError) -> [AttributeRow] {
        try attributeRows("SELECT \(SQLiteStorage.attributeColumns) FROM attributes WHERE search_tag = ?", [.blob(searchTag)])
    }

    package func upsertAttribute(_ row: AttributeRow) throws(VaultError) {
        try db.run("""
            INSERT INTO attributes (node, tag, search_tag, name, value) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (node, tag) DO UPDATE SET search_tag = excluded.search_tag, name = excluded.name, value = excluded.value
            """, [.integer(row.node.rawValue), .blob(row.tag), .blob(row.searchTag), .blob(row.sealedName), .blob(row.sealedValue)])
    }

    package func deleteAttribute(of node: NodeID, tag: [UInt8]) throws(VaultError) -> Bool {
        try db.run("DELETE FROM attributes WHERE node = ? AND tag = ?", [.integer(node.rawValue), .blob(tag)]) > 0
    }

    package func deleteAttributes(of node: NodeID, subtree: Bool) throws(VaultError) {
        if subtree {
            try db.run("""
                WITH RECURSIVE subtree(id) AS (
                    SELECT ? UNION SELECT nodes.id FROM nodes JOIN subtree ON nodes.parent = subtree.id
                )
                DELETE FROM attributes WHERE node IN subtree
                """, [.integer(node.rawValue)])
        } else {
            try db.run("DELETE FROM attributes WHERE node = ?", [.integer(node.rawValue)])
        }
    }

    package func everyAttribute() throws(VaultError) -> [StoredAttribute] {
        var attributes: [StoredAttribute] = []
        try db.query("SELECT \(SQLiteStorage.attributeColumns) FROM attributes ORDER BY node") { (row) throws(VaultError) in
            attributes.append(SQLiteStorage.attributeRow(row).map(StoredAttribute.row) ?? .malformed(node: row[0].integer))
        }
        return attributes
    }

    // MARK: access rules

    private func ruleRows(_ sql: String, _ arguments: [SQLValue] = []) throws(VaultError) -> [RuleRow] {
        var rows: [RuleRow] = []
        try db.query(sql, arguments) { (row) throws(VaultError) in
            guard let node = row[0].integer, let sealed = row[1].blob else {
                throw .integrityFailure("the access rules of record \(row[0].integer.map(String.init) ?? "?") (malformed row)")
            }
            rows.append(RuleRow(node: NodeID(node), sealed: sealed))
        }
        return rows
    }

    package func ruleRows() throws(VaultError) -> [RuleRow] {
        try ruleRows("SELECT node, sealed FROM rules ORDER BY node")
    }

    package func upsertRule(_ row: RuleRow) throws(VaultError) {
        try db.run("INSERT INTO rules (node, sealed) VALUES (?, ?) ON CONFLICT (node) DO UPDATE SET sealed = excluded.sealed",
                   [.integer(row.node.rawValue), .blob(row.sealed)])
    }

    package func deleteRule(of node: NodeID) throws(VaultError) -> Bool {
        try db.run("DELETE FROM rules WHERE node = ?", [.integer(node.rawValue)]) > 0
    }

    package func deleteRules(of node: NodeID, subtree: Bool) throws(VaultError) -> [RuleRow] {
        if subtree {
            return try ruleRows("""
                WITH RECURSIVE subtree(id) AS (
                    SELECT ? UNION SELECT nodes.id FROM nodes JOIN subtree ON nodes.parent = subtree.id
                )
                DELETE FROM rules WHERE node IN subtree RETURNING node, sealed
                """, [.integer(node.rawValue)])
        }
        return try ruleRows("DELETE FROM rules WHERE node = ? RETURNING node, sealed", [.integer(node.rawValue)])
    }

    package func rulesMAC() throws(VaultError) -> [UInt8]? {
        try db.row("SELECT rules_mac FROM vault WHERE singleton = 1")?.first?.blob
    }

    package func setRulesMAC(_ mac: [UInt8]) throws(VaultError) {
        guard try db.run("UPDATE vault SET rules_mac = ? WHERE singleton = 1", [.blob(mac)]) == 1 else {
            throw .integrityFailure("vault header (missing)")
        }
        sealedPartsChanged = true
    }

    // MARK: access log

    package func nextAccessLogSequence() throws(VaultError) -> Int64 {
        try db.integer("SELECT coalesce(max(sequence), 0) + 1 FROM access_log")
    }

    package func appendAccessLogBatch(_ row: AccessLogRow) throws(VaultError) {
        try db.run("INSERT INTO access_log (sequence, first_time, last_time, entries, sealed) VALUES (?, ?, ?, ?, ?)", [
            .integer(row.sequence), .integer(row.firstTime), .integer(row.lastTime), .integer(Int64(row.entries)), .blob(row.sealed),
        ])
    }

    package func replaceAccessLogBatch(sequence: Int64, sealed: [UInt8]) throws(VaultError) {
        try db.run("UPDATE access_log SET sealed = ? WHERE sequence = ?", [.blob(sealed), .integer(sequence)])
    }

    package func sealedAccessLogBatch(sequence: Int64) throws(VaultError) -> [UInt8]? {
        try db.row("SELECT sealed FROM access_log WHERE sequence = ?", [.integer(sequence)])?[0].blob
    }

    package func accessLogBatches(since: Int64?, afterSequence: Int64?) throws(VaultError) -> [StoredAccessLogBatch] {
        var batches: [StoredAccessLogBatch] = []
        try db.query("""
            SELECT sequence, first_time, last_time, entries, sealed FROM access_log
            WHERE last_time >= ? AND sequence > ? ORDER BY sequence
            """, [.integer(since ?? Int64.min), .integer(afterSequence ?? Int64.min)]) { (row) throws(VaultError) in
            if let sequence = row[0].integer, let first = row[1].integer, let last = row[2].integer, let entries = row[3].integer,
               let sealed = row[4].blob, entries >= 0, entries <= Int64(Int32.max) {
                batches.append(.row(AccessLogRow(sequence: sequence, firstTime: first, lastTime: last, entries: Int(entries), sealed: sealed)))
            } else {
                batches.append(.malformed(sequence: row[0].integer))
            }
        }
        return batches
    }

    package func pruneAccessLog(olderThan: Int64, maximumEntries: Int) throws(VaultError) -> Int {
        let newest = "(SELECT max(sequence) FROM access_log)"
        // Always a prefix (up to the last batch that is too old), even if the clock went back
        // meanwhile: what is kept stays one run of sequences, so a gap means tampering.
        var deleted = try db.run("""
            DELETE FROM access_log WHERE sequence < \(newest)
            AND sequence <= (SELECT max(sequence) FROM access_log WHERE last_time < ?)
            """, [.integer(olderThan)])
        // A running total from the newest batch back: a batch is kept while the entries of it
        // and of every newer one stay within the bound.
        deleted += try db.run("""
            DELETE FROM access_log WHERE sequence < \(newest) AND sequence IN (
                SELECT sequence FROM (
                    SELECT sequence, sum(entries) OVER (ORDER BY sequence DESC) AS total FROM access_log
                ) WHERE total > ?
            )
            """, [.integer(Int64(maximumEntries))])
        return deleted
    }

    package func accessLogSummary() throws(VaultError) -> AccessLogSummary {
        guard let row = try db.row("SELECT count(*), coalesce(sum(entries), 0), max(sequence) FROM access_log"),
              let batches = row[0].integer, let entries = row[1].integer else {
            throw .storageFailure("no result for the access log summary")
        }
        return AccessLogSummary(batches: Int(batches), entries: Int(entries), lastSequence: row[2].integer)
    }
}
