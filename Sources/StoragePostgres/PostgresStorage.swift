import VaultStorageKit
/// A vault in a PostgreSQL database, beside others there: every row carries the vault's name
/// and every statement scopes by it. One connection per open vault; each method is at most one
/// prepared statement. Inside a transaction, statements whose results nothing waits for
/// (BEGIN, the vault row's lock, inserts, updates, the seal, the NOTIFY) go with the next one
/// that is waited for, in one round trip. The vault's row and the nodes read or written are
/// kept between transactions, true at one change count (`PostgresKnownRows`): they answer
/// while no other session's commit was heard of, and a write from them goes in one flight
/// whose lock checks the count. What the records mean is NodeStore's business.
package final class PostgresStorage: VaultStorage, @unchecked Sendable {
    private let db: PostgresConnection
    private let location: PostgresLocation
    /// Write transactions this connection committed that the change token sees.
    private var commits: Int64 = 0
    /// NOTIFYs from other sessions received on the vault's channel.
    private var othersCommits: Int64 = 0
    private var name: PGValue { .text(location.vaultName) }
    /// What the write transaction under way touched, for its NOTIFY.
    private var touched = PostgresChangeNotice()
    /// Marks this storage's own NOTIFYs, so this process's listener skips them.
    private let origin = (0..<8).map { _ in String(UInt8.random(in: .min ... .max), radix: 16) }.joined()

    private init(db: PostgresConnection, location: PostgresLocation) {
        self.db = db
        self.location = location
    }

    // MARK: the vault's row

    /// Creates or upgrades the tables, claims the vault's name and runs `populate`, all in one
    /// durable transaction. Refuses a name already taken.
    package static func create(at path: String, _ populate: (PostgresStorage) throws(VaultError) -> Void) throws(VaultError) -> PostgresStorage {
        let location = try PostgresLocation(path)
        let db = try PostgresConnection(location: location)
        let storage = PostgresStorage(db: db, location: location)
        try storage.transaction(begin: "BEGIN", durable: true, notify: true) { () throws(VaultError) in
            try PostgresSchema.upgrade(db, at: location.displayName)
            guard try db.run("INSERT INTO vaults (name) VALUES ($1) ON CONFLICT (name) DO NOTHING", [storage.name]) == 1 else {
                throw .vaultExists(location.displayName)
            }
            try populate(storage)
        }
        try db.listen(location.channel)
        try storage.noteChangeCount()
        return storage
    }

    /// Connects and checks that the database holds this vault; writes nothing, unless its
    /// tables are of an older layout, which it upgrades first.
    package static func open(at path: String) throws(VaultError) -> PostgresStorage {
        let location = try PostgresLocation(path)
        let db = try PostgresConnection(location: location)
        let storage = PostgresStorage(db: db, location: location)
        let stored = try PostgresSchema.storedVersion(db, at: location.displayName)
        guard stored > 0 else { throw .vaultNotFound(location.displayName) }
        try PostgresSchema.refuseNewer(stored, at: location.displayName)
        if stored < PostgresSchema.version {
            try storage.transaction(begin: "BEGIN", durable: true, notify: false) { () throws(VaultError) in
                try PostgresSchema.upgrade(db, at: location.displayName)
            }
        }
        guard try db.row("SELECT 1 FROM vaults WHERE name = $1", [storage.name]) != nil else {
            throw .vaultNotFound(location.displayName)
        }
        // Before the first read, so no change committed after it goes unnoticed.
        try db.listen(location.channel)
        try storage.noteChangeCount()
        return storage
    }

    // MARK: transactions

    private func transaction<R: ~Copyable>(begin: String, durable: Bool, notify: Bool, keepsVaultRow: Bool = false, readOnly: Bool = false,
                                           _ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        // Its BEGIN waits for the first round trip, where a lost connection cannot be replaced.
        try db.reconnectIfLost()
        db.inTransaction = true
        db.defers = true
        touched.reset()
        pending = nil
        sealedPartsChanged = false
        vaultRow = nil
        knownVerified = false
        failedItsCheck = false
        defer {
            db.inTransaction = false
            db.defers = false
            db.discardDeferred()
            pending = nil
            sealedPartsChanged = false
            awaitingLock = false
            vaultRow = nil
            knownVerified = false
        }
        let exchangesAtBegin = db.exchanges
        do throws(VaultError) {
            try db.later(begin)
            if !durable { try db.later("SET LOCAL synchronous_commit = off") }
            let result = try body()
            // A read that known rows answered whole sent nothing, its BEGIN included: nothing to end.
            if readOnly, db.exchanges == exchangesAtBegin { return result }
            // The seal binds what the lock read.
            if awaitingLock { try db.flush() }
            // The state sealed and the NOTIFY (delivered at commit, to every other connection
            // listening on the vault) in one statement: the generation costs no round trip of
            // its own on a notifying write.
            var sealed: Int64? = nil
            var sealedMAC: PGValue = .null
            if let cipher = generationCipher, let state = pending, state.format >= VaultFormat.oldestWithGeneration {
                let mac = PGValue.bytes(cipher.stateMAC(VaultState(generation: state.generation, headerMAC: state.header,
                                                                   rulesMAC: state.rules, membersMAC: state.members, stateMAC: nil)))
                let raised = PGValue.integer(state.generation)
                if notify {
                    try db.later("UPDATE vaults SET generation = $3, state_mac = $2 WHERE name = $1 RETURNING pg_notify($4, $5)",
                                 [name, mac, raised, .text(location.channel), .text(touched.payload(origin: origin))])
                } else {
                    try db.later("UPDATE vaults SET generation = $3, state_mac = $2 WHERE name = $1", [name, mac, raised])
                }
                sealed = state.generation
                sealedMAC = mac
            } else if notify {
                try db.later("SELECT pg_notify($1, $2)", [.text(location.channel), .text(touched.payload(origin: origin))])
            }
            do throws(VaultError) {
                try db.run("COMMIT")
                if let sealed { lastSealedGeneration = sealed }
                // The vault's row as this write left it, for the next one to start from.
                if keepsVaultRow, knownVerified, var row = vaultRow {
                    if let sealed {
                        row[1] = .integer(sealed)
                        row[7] = sealedMAC
                    }
                    known.vault = row
                } else if keepsVaultRow {
                    known.vault = nil
                }
            } catch {
                // It may have committed or not: reported as failed, never as done.
                guard case .storageUnreachable(let reason) = error else { throw error }
                throw .storageUnreachable("\(reason); whether the last change was committed is unknown, so it is reported as failed")
            }
            return result
        } catch {
            // A lost connection's transaction is the server's to abort; the next call connects again.
            // What was never sent is dropped: after a failure the server would skip the ROLLBACK.
            db.discardDeferred()
            db.defers = false
            // What it noted may not have happened: nothing is known any more.
            known.restart(at: nil)
            failedItsCheck = db.lastFailureState == PostgresStorage.checkFailed
            if db.isConnected { _ = try? db.run("ROLLBACK") }
            throw error
        }
    }

    package func write<R: ~Copyable>(_ durability: CommitDurability, seenByChangeToken: Bool,
                             _ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        // With the vault's row and the rows the body reads known, the whole write goes in one
        // flight: its lock checks that they are still true (the change count and generation
        // they were read at), else the transaction fails whole and runs again, asking.
        if try knownRowsMayStart(needingVaultRow: true) {
            do throws(VaultError) {
                return try write(durability, seenByChangeToken: seenByChangeToken, fromKnownRows: true, body)
            } catch {
                guard failedItsCheck else { throw error }
            }
        }
        return try write(durability, seenByChangeToken: seenByChangeToken, fromKnownRows: false, body)
    }

    /// What a check of known rows fails with: division by zero (SQL has no assertion).
    private static let checkFailed = "22012"
    /// The last transaction failed on such a check.
    private var failedItsCheck = false

    private func write<R: ~Copyable>(_ durability: CommitDurability, seenByChangeToken: Bool, fromKnownRows: Bool,
                                     _ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        let result = try transaction(begin: "BEGIN", durable: durability == .durable, notify: seenByChangeToken,
                                     keepsVaultRow: true) { () throws(VaultError) -> R in
            // The vault row's lock serialises this vault's writers, as SQLite's write lock does;
            // every statement after it reads what the previous writer committed. A change
            // others are told of is counted in the same statement (no round trip of its own).
            // The same statement returns what the state binds, so the generation is raised and
            // sealed at commit without reading anything (until then the row shows the state
            // as committed, which checks inside the write compare with).
            // It goes with the body's first read: nothing here waits for it.
            let counted = seenByChangeToken ? Int64(1) : 0
            func lock(_ returning: String) -> String {
                seenByChangeToken
                    ? "UPDATE vaults SET change_count = change_count + 1 WHERE name = $1 RETURNING " + returning
                    : "SELECT " + returning + " FROM vaults WHERE name = $1 FOR UPDATE"
            }
            let returning = PostgresStorage.vaultColumns + ", change_count"
            if fromKnownRows, let count = known.count, let row = known.vault, let generation = row[1].integer {
                knownVerified = true
                vaultRow = row
                known.advance(to: count + counted)
                notePending(row)
                try db.later(lock(returning + ", 0 / (change_count = $2 AND generation = $3)::int"),
                             [name, .integer(count + counted), .integer(generation)]) {
                    (rows: [[PGValue]], _: Int) throws(VaultError) in
                    guard !rows.isEmpty else { throw .vaultNotFound(self.location.displayName) }
                }
                return try body()
            }
            awaitingLock = true
            try db.later(lock(returning), [name]) { (rows: [[PGValue]], _: Int) throws(VaultError) in
                self.awaitingLock = false
                guard let row = rows.first, let count = row[PostgresStorage.vaultColumnCount].integer else {
                    throw .vaultNotFound(self.location.displayName)
                }
                let columns = Array(row.prefix(PostgresStorage.vaultColumnCount))
                self.vaultRow = columns
                // The rows known are true still when only this write counted since.
                if let known = self.known.count, known + counted == count, self.knownConnection == self.db.generation {
                    self.known.advance(to: count)
                } else {
                    self.restartKnownRows(at: count)
                }
                self.knownVerified = true
                self.notePending(columns)
            }
            return try body()
        }
        if seenByChangeToken { commits += 1 }
        return result
    }

    /// The state the write under way seals at commit, from the vault's row as its lock found it.
    private func notePending(_ row: [PGValue]) {
        if generationCipher != nil, let format = row[0].integer, let generation = row[1].integer, let header = row[2].bytes {
            pending = PendingState(format: Int(format), generation: generation + 1, header: header,
                                   rules: row[3].bytes, members: row[4].bytes)
        }
    }

    package func read<R: ~Copyable>(_ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        // Inside a transaction already (a write's): its snapshot is the one to read.
        guard !db.inTransaction else { return try body() }
        // Known rows are one snapshot already (all true at one count): a read they answer
        // whole sends nothing; one that asks the server too checks, first in its snapshot,
        // that they are still true, else it runs again asking.
        if try knownRowsMayStart(needingVaultRow: false) {
            do throws(VaultError) {
                return try read(fromKnownRows: true, body)
            } catch {
                guard failedItsCheck else { throw error }
            }
        }
        return try read(fromKnownRows: false, body)
    }

    /// `body` in a snapshot the server takes now, never answered from the rows this
    /// connection keeps between transactions: those may be a moment behind the server (a
    /// commit that notifies nobody, an access log batch, raises the generation unheard), which
    /// a read may show but a verdict against what another process of this machine wrote (the
    /// offline replica it copied) must not rest on.
    package func readAfresh<R: ~Copyable>(_ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        guard !db.inTransaction else { return try body() }
        return try read(fromKnownRows: false, body)
    }

    private func read<R: ~Copyable>(fromKnownRows: Bool, _ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        try transaction(begin: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", durable: true, notify: false, readOnly: true) {
            () throws(VaultError) -> R in
            if fromKnownRows, let count = known.count {
                knownVerified = true
                vaultRow = known.vault
                try db.later("SELECT 0 / (change_count = $2)::int FROM vaults WHERE name = $1", [name, .integer(count)])
            }
            return try body()
        }
    }

    package func statements<R: ~Copyable>(_ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        try body()
    }

    /// Its sync is a commit on the connection: not alongside others.
    package var syncsAlongsideCommits: Bool { false }

    package var isShared: Bool { true }

    package func syncAlongsideCommits() throws(VaultError) {
        try syncCarriedCommits()
    }

    package func syncCarriedCommits() throws(VaultError) {
        // A synchronous commit waits for the WAL flushed up to its commit record, so every
        // asynchronous commit before it is flushed too; but only a transaction that wrote WAL
        // waits at all (a transaction id alone writes none). So the vault's row is written
        // back unchanged: one tuple of WAL, no NOTIFY, the change count as it was. (Left alone,
        // PostgreSQL's walwriter flushes them within 3 x wal_writer_delay, 600 ms by default.)
        try transaction(begin: "BEGIN", durable: true, notify: false) { () throws(VaultError) in
            try db.later("UPDATE vaults SET change_count = change_count WHERE name = $1", [name])
        }
    }

    /// The server's autovacuum returns dead rows' space; nothing to do here.
    package func reclaimFreeSpace(trimmingLog: Bool, continuing: Bool) throws(VaultError) -> Bool { false }

    package func changeListener() -> VaultChangeListener? {
        VaultChangeListener(location: location, ownOrigin: origin, signal: othersHeard)
    }

    /// A listener for the vault at `path` while no storage of it is connected (a vault opened
    /// from its offline replica): it hears every session's commits, there being none of ours.
    package static func changeListener(at path: String) throws(VaultError) -> VaultChangeListener {
        VaultChangeListener(location: try PostgresLocation(path), ownOrigin: "", signal: OthersCommitSignal())
    }

    package func changeToken() throws(VaultError) -> StorageChangeToken {
        try noteOthersCommits()
        // A new connection listened only from its start: what was committed while there was
        // none is seen in the vault's count instead.
        if db.generation != changeCountGeneration { try noteChangeCount() }
        return StorageChangeToken(commits, othersCommits, changeCount)
    }

    package func othersChangeToken() throws(VaultError) -> StorageChangeToken {
        try noteOthersCommits()
        // A new connection may have missed NOTIFYs: its count, read at connect, stands for them.
        if db.generation != changeCountGeneration { try noteChangeCount() }
        return StorageChangeToken(othersCommits, changeCount)
    }

    // MARK: what the connection knows

    /// The vault's row as `vaultColumns` lists it, read once per transaction (a write's lock
    /// returns it); nil outside transactions and after a change to it.
    private var vaultRow: [PGValue]?
    private static let vaultColumns = "format_version, generation, header_mac, rules_mac, members_mac, vault_id, item_size_limit, "
        + "state_mac, next_node_id"
    private static let vaultColumnCount = 9
    /// A write's lock is deferred until this is false.
    private var awaitingLock = false
    /// Rows read or written, kept between transactions while they are true (`knownRowsAnswer`).
    private var known = PostgresKnownRows()
    /// Inside a transaction: its lock or its first read found the count the known rows are
    /// true at (or, for a write or read that started from them, checks it in its first flight).
    private var knownVerified = false
    /// The connection (`PostgresConnection.generation`) the known rows were read on: a new one
    /// may have missed notices.
    private var knownConnection = 0
    /// What the listener heard, and what of it was seen here.
    private let othersHeard = OthersCommitSignal()
    private var othersHeardSeen = 0

    /// Starts the known rows over at `count`, on this connection.
    private func restartKnownRows(at count: Int64?) {
        known.restart(at: count)
        knownConnection = db.generation
    }

    /// Takes in the notices of other sessions' commits that arrived (on this connection or
    /// the listener's), without waiting: after any, nothing known is used again before the
    /// server is asked.
    private func noteOthersCommits() throws(VaultError) {
        let heard = try db.notificationsFromOthers()
        othersCommits += Int64(heard)
        let listened = othersHeard.value
        if heard > 0 || listened != othersHeardSeen || db.generation != knownConnection {
            othersHeardSeen = listened
            restartKnownRows(at: nil)
        }
    }

    /// Whether known rows may answer a read now: inside a transaction once its lock or first
    /// read found them true; outside one while no other session's commit was heard of since
    /// they were read. (A commit elsewhere is heard of about as soon as it is made; until
    /// then a read outside a write may show the vault as it was just before, as a read a
    /// moment earlier would have. A write never commits on such a row: its lock checks.)
    private func knownRowsAnswer() throws(VaultError) -> Bool {
        if db.inTransaction { return knownVerified }
        try noteOthersCommits()
        return known.count != nil
    }

    /// Whether a transaction may start from the known rows (a write needs the vault's row).
    private func knownRowsMayStart(needingVaultRow: Bool) throws(VaultError) -> Bool {
        guard !db.inTransaction, db.isConnected else { return false }
        try noteOthersCommits()
        return known.count != nil && (known.vault != nil || !needingVaultRow)
    }

    /// The count a query read with its rows: the known rows start over if it moved.
    private func noteCount(_ count: Int64?) {
        guard let count else { return }
        if known.count != count || knownConnection != db.generation { restartKnownRows(at: count) }
        if db.inTransaction { knownVerified = true }
    }

    /// Notes `node` (nil: known not to exist) as it is now.
    private func remember(_ id: NodeID, _ node: NodeRow?) {
        guard forgotUnverified() else { return }
        known.note(id, node)
    }

    /// A change inside a write before its lock found the known rows true cannot be followed
    /// in them (the lock may yet keep them): they are forgotten. Whether they are still kept.
    private func forgotUnverified() -> Bool {
        guard db.inTransaction, !knownVerified else { return true }
        known.restart(at: nil)
        return false
    }

    /// Notes an item's sealed content as it is now, as `remember` notes its row.
    private func rememberContent(_ id: NodeID, _ sealed: [UInt8]?) {
        known.noteContent(id, !db.inTransaction || knownVerified ? sealed : nil)
    }

    private func remembered(_ id: NodeID) throws(VaultError) -> NodeRow?? {
        try knownRowsAnswer() ? known.node(id) : nil
    }

    /// What a write knows of node `id` (its lock found the known rows true).
    private func knownInTransaction(_ id: NodeID) -> NodeRow?? {
        db.inTransaction && knownVerified ? known.node(id) : nil
    }

    /// The vault's row: remembered inside a transaction, read afresh outside one. nil when
    /// the vault has no row.
    private func currentVaultRow() throws(VaultError) -> [PGValue]? {
        if awaitingLock { try db.flush() }
        if let vaultRow { return vaultRow }
        let row = try db.row("SELECT \(PostgresStorage.vaultColumns) FROM vaults WHERE name = $1", [name])
        if db.inTransaction { vaultRow = row }
        return row
    }

    /// The vault's count of notifying commits, read on each new connection.
    private var changeCount: Int64 = 0
    private var changeCountGeneration = 0

    private func noteChangeCount() throws(VaultError) {
        changeCount = try db.integer("SELECT change_count FROM vaults WHERE name = $1", [name])
        changeCountGeneration = db.generation
    }

    // MARK: connection

    /// Tells `observer` when the connection is lost and when it is back.
    package func observeConnection(_ observer: @escaping @Sendable (StorageConnectionEvent) -> Void) {
        db.observer = observer
    }

    // MARK: format

    package func formatVersion() throws(VaultError) -> Int {
        guard let version = try currentVaultRow()?[0].integer else {
            throw .vaultNotFound(location.displayName)
        }
        return Int(version)
    }

    package func setFormatVersion(_ version: Int) throws(VaultError) {
        touched.noteEverything()
        try updateVaultRow("format_version = $2", .integer(Int64(version)))
        pending?.format = version
    }

    /// The tables are created at the current format; there is no older PostgreSQL layout yet.
    package func prepareStorage(forFormatVersion version: Int) throws(VaultError) {}

    private func updateVaultRow(_ assignment: String, _ value: PGValue) throws(VaultError) {
        vaultRow = nil
        guard try db.run("UPDATE vaults SET \(assignment) WHERE name = $1", [name, value]) == 1 else {
            throw .integrityFailure("vault header (missing)")
        }
    }

    // MARK: header

    package func insertHeader(_ header: VaultHeader, firstNodeID: NodeID) throws(VaultError) {
        vaultRow = nil
        guard try db.run("UPDATE vaults SET vault_id = $2, item_size_limit = $3, next_node_id = $4, header_mac = $5 WHERE name = $1", [
            name, .bytes(header.vaultID), .integer(Int64(header.itemSizeLimit)), .integer(firstNodeID.rawValue), .bytes(header.mac),
        ]) == 1 else { throw .integrityFailure("vault header (missing)") }
    }

    package func header() throws(VaultError) -> VaultHeader? {
        guard let row = try currentVaultRow(), let vaultID = row[5].bytes, let limit = row[6].integer, let mac = row[2].bytes else { return nil }
        return VaultHeader(vaultID: vaultID, itemSizeLimit: Int(limit), mac: mac)
    }

    package func updateHeaderMAC(_ mac: [UInt8]) throws(VaultError) {
        touched.noteEverything()
        try updateVaultRow("header_mac = $2", .bytes(mac))
        pending?.header = mac
        sealedPartsChanged = true
    }

    // MARK: generation

    package var generationCipher: (any GenerationSealer)?
    package private(set) var lastSealedGeneration: Int64?
    package private(set) var sealedPartsChanged = false

    /// The vault's row as the write under way leaves it, from its lock statement on (each
    /// change of a sealed part noted here), so its seal at commit reads nothing; `generation`
    /// is the one it raises to.
    private struct PendingState {
        var format: Int
        let generation: Int64
        var header: [UInt8]
        var rules: [UInt8]?
        var members: [UInt8]?
    }
    private var pending: PendingState?

    package func vaultState() throws(VaultError) -> VaultState? {
        guard let row = try currentVaultRow(), let generation = row[1].integer, let header = row[2].bytes else { return nil }
        return VaultState(generation: generation, headerMAC: header, rulesMAC: row[3].bytes, membersMAC: row[4].bytes, stateMAC: row[7].bytes)
    }

    package func setMembersMAC(_ mac: [UInt8]) throws(VaultError) {
        try updateVaultRow("members_mac = $2", .bytes(mac))
        pending?.members = mac
        sealedPartsChanged = true
    }

    package func raiseGeneration(sealedBy cipher: any GenerationSealer) throws(VaultError) {
        vaultRow = nil
        guard let row = try db.row("UPDATE vaults SET generation = generation + 1 WHERE name = $1 "
                                       + "RETURNING generation, header_mac, rules_mac, members_mac", [name]),
              let generation = row[0].integer, let header = row[1].bytes else { throw .integrityFailure("vault header (missing)") }
        let state = VaultState(generation: generation, headerMAC: header, rulesMAC: row[2].bytes, membersMAC: row[3].bytes, stateMAC: nil)
        try updateVaultRow("state_mac = $2", .bytes(cipher.stateMAC(state)))
        lastSealedGeneration = generation
    }

    package func allocateNodeID() throws(VaultError) -> NodeID {
        // Under the write's lock the row read is the row as it is: the id is known, and the
        // increment waits for the next round trip, which checks that it gave that id.
        if db.inTransaction, let row = try currentVaultRow(), let next = row[8].integer {
            vaultRow?[8] = .integer(next + 1)
            // Checked in the statement, which fails the transaction whole: its answer may come
            // with the commit's.
            try db.later("UPDATE vaults SET next_node_id = next_node_id + 1 WHERE name = $1 RETURNING 0 / (next_node_id = $2 + 1)::int",
                         [name, .integer(next)])
            return NodeID(next)
        }
        guard let id = try db.row("UPDATE vaults SET next_node_id = next_node_id + 1 WHERE name = $1 RETURNING next_node_id - 1",
                                  [name])?.first?.integer else {
            throw .integrityFailure("vault header (missing)")
        }
        return NodeID(id)
    }

    package func nextNodeID() throws(VaultError) -> NodeID? {
        try currentVaultRow()?[8].integer.map(NodeID.init)
    }

    // MARK: key slots

    package func keySlots() throws(VaultError) -> [KeySlotRow] {
        try db.rows("SELECT id, kdf_algorithm, kdf_opslimit, kdf_memlimit, salt, wrapped_master_key FROM key_slots WHERE vault = $1 ORDER BY id",
                    [name]).map { (row) throws(VaultError) in
            guard let id = row[0].integer, let algorithm = row[1].integer, let ops = row[2].integer,
                  let mem = row[3].integer, let salt = row[4].bytes, let wrapped = row[5].bytes else {
                throw .integrityFailure("key slot (malformed row)")
            }
            var parameters = KDFParameters(opsLimit: UInt64(bitPattern: ops), memLimit: UInt64(bitPattern: mem))
            parameters.algorithm = algorithm
            return KeySlotRow(id: id, parameters: parameters, salt: salt, wrappedMasterKey: wrapped)
        }
    }

    package func upsertKeySlot(_ slot: KeySlotRow) throws(VaultError) {
        try db.run("""
            INSERT INTO key_slots (vault, id, kdf_algorithm, kdf_opslimit, kdf_memlimit, salt, wrapped_master_key) VALUES ($1, $2, $3, $4, $5, $6, $7)
            ON CONFLICT (vault, id) DO UPDATE SET kdf_algorithm = excluded.kdf_algorithm, kdf_opslimit = excluded.kdf_opslimit,
                kdf_memlimit = excluded.kdf_memlimit, salt = excluded.salt, wrapped_master_key = excluded.wrapped_master_key
            """, [
            name, .integer(slot.id), .integer(slot.parameters.algorithm), .integer(Int64(bitPattern: slot.parameters.opsLimit)),
            .integer(Int64(bitPattern: slot.parameters.memLimit)), .bytes(slot.salt), .bytes(slot.wrappedMasterKey),
        ])
    }

    package func deleteKeySlot(id: Int64) throws(VaultError) -> Bool {
        try db.run("DELETE FROM key_slots WHERE vault = $1 AND id = $2", [name, .integer(id)]) > 0
    }

    // MARK: TPM PIN slots

    package func pinSlots() throws(VaultError) -> [PINSlotRow] {
        try db.rows("""
            SELECT id, kdf_algorithm, kdf_opslimit, kdf_memlimit, salt, pcr_mask, sealed_key, wrapped_master_key
            FROM pin_slots WHERE vault = $1 ORDER BY id
            """, [name]).map { (row) throws(VaultError) in
            guard let id = row[0].integer, let algorithm = row[1].integer, let ops = row[2].integer, let mem = row[3].integer,
                  let salt = row[4].bytes, let mask = row[5].integer, let pcrMask = UInt32(exactly: mask),
                  let sealed = row[6].bytes, let wrapped = row[7].bytes else {
                throw .integrityFailure("TPM PIN slot (malformed row)")
            }
            var parameters = KDFParameters(opsLimit: UInt64(bitPattern: ops), memLimit: UInt64(bitPattern: mem))
            parameters.algorithm = algorithm
            return PINSlotRow(id: id, parameters: parameters, salt: salt, pcrMask: pcrMask, sealedKey: sealed, wrappedMasterKey: wrapped)
        }
    }

    package func upsertPINSlot(_ slot: PINSlotRow) throws(VaultError) {
        try db.run("""
            INSERT INTO pin_slots (vault, id, kdf_algorithm, kdf_opslimit, kdf_memlimit, salt, pcr_mask, sealed_key, wrapped_master_key)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
            ON CONFLICT (vault, id) DO UPDATE SET kdf_algorithm = excluded.kdf_algorithm, kdf_opslimit = excluded.kdf_opslimit,
                kdf_memlimit = excluded.kdf_memlimit, salt = excluded.salt, pcr_mask = excluded.pcr_mask,
                sealed_key = excluded.sealed_key, wrapped_master_key = excluded.wrapped_master_key
            """, [
            name, .integer(slot.id), .integer(slot.parameters.algorithm), .integer(Int64(bitPattern: slot.parameters.opsLimit)),
            .integer(Int64(bitPattern: slot.parameters.memLimit)), .bytes(slot.salt), .integer(Int64(slot.pcrMask)),
            .bytes(slot.sealedKey), .bytes(slot.wrappedMasterKey),
        ])
    }

    package func deletePINSlot(id: Int64) throws(VaultError) -> Bool {
        try db.run("DELETE FROM pin_slots WHERE vault = $1 AND id = $2", [name, .integer(id)]) > 0
    }

    // MARK: member slots

    package func memberSlots() throws(VaultError) -> [MemberSlotRow] {
        try db.rows("SELECT name, public_key, sealed_master_key FROM member_slots WHERE vault = $1 ORDER BY name", [name]).map {
            (row) throws(VaultError) in
            guard let memberName = row[0].bytes, let publicKey = row[1].bytes, let sealed = row[2].bytes else {
                throw .integrityFailure("member slot (malformed row)")
            }
            return MemberSlotRow(name: memberName, publicKey: publicKey, sealedMasterKey: sealed)
        }
    }

    package func insertMemberSlot(_ slot: MemberSlotRow) throws(VaultError) {
        // Checked first rather than mapped from a constraint error: the message names which.
        if try db.row("SELECT 1 FROM member_slots WHERE vault = $1 AND (name = $2 OR public_key = $3)",
                      [name, .bytes(slot.name), .bytes(slot.publicKey)]) != nil {
            throw .alreadyExists("member \(String(decoding: slot.name, as: UTF8.self)) or its public key")
        }
        try db.run("INSERT INTO member_slots (vault, name, public_key, sealed_master_key) VALUES ($1, $2, $3, $4)",
                   [name, .bytes(slot.name), .bytes(slot.publicKey), .bytes(slot.sealedMasterKey)])
    }

    package func deleteMemberSlot(named memberName: [UInt8]) throws(VaultError) -> Bool {
        try db.run("DELETE FROM member_slots WHERE vault = $1 AND name = $2", [name, .bytes(memberName)]) > 0
    }

    // MARK: nodes

    private static let nodeColumns = "id, parent, kind, incarnation, name_tag, name, attributes"

    private static func nodeRow(_ row: [PGValue]) -> NodeRow? {
        guard let id = row[0].integer, let parent = row[1].integer, let kind = row[2].integer, let incarnation = row[3].bytes,
              let tag = row[4].bytes, let name = row[5].bytes, let attributes = row[6].bytes else { return nil }
        return NodeRow(id: NodeID(id), parent: NodeID(parent), kind: kind, incarnation: incarnation, nameTag: tag,
                       sealedName: name, sealedAttributes: attributes)
    }

    private static func readableNodeRow(_ row: [PGValue]) throws(VaultError) -> NodeRow {
        guard let node = nodeRow(row) else {
            throw .integrityFailure("record \(row.first?.integer.map(String.init) ?? "?") (malformed row)")
        }
        return node
    }

    package func node(_ id: NodeID) throws(VaultError) -> NodeRow? {
        if let known = try remembered(id) { return known }
        return try countedNode(byID: id, withContent: false)?.row
    }

    /// The node columns of a join of `vaults` with `nodes` as `n`, after the vault's count.
    private static let countedNodeColumns = "vaults.change_count, " + nodeColumns.split(separator: ", ").map { "n." + $0 }.joined(separator: ", ")

    /// Node `id` read with the vault's count in one statement (one snapshot), so that what is
    /// known stays true at one count; noted as known either way. nil when the vault has no row.
    private func countedNode(byID id: NodeID, withContent: Bool) throws(VaultError) -> (row: NodeRow?, sealedContent: [UInt8]?)? {
        guard let row = try db.row("SELECT \(PostgresStorage.countedNodeColumns)\(withContent ? ", n.content" : "") FROM vaults "
                                   + "LEFT JOIN nodes n ON n.vault = vaults.name AND n.id = $2 WHERE vaults.name = $1",
                                   [name, .integer(id.rawValue)]) else { return nil }
        noteCount(row[0].integer)
        let columns = Array(row[1...])
        guard columns[0].integer != nil else {
            remember(id, nil)
            return (nil, nil)
        }
        let node = try PostgresStorage.readableNodeRow(columns)
        remember(id, node)
        if withContent { rememberContent(id, columns[7].bytes) }
        return (node, withContent ? columns[7].bytes : nil)
    }

    /// One statement, so one snapshot and one round trip, where the protocol's default takes a
    /// read transaction of three (its BEGIN and COMMIT each waited for).
    package func nodeAndContent(_ id: NodeID) throws(VaultError) -> (row: NodeRow, sealedContent: [UInt8]?)? {
        if case .some(.some(let node)) = try remembered(id), node.kind != NodeKind.item.rawValue || known.content(of: id) != nil {
            return (node, known.content(of: id))
        }
        guard let read = try countedNode(byID: id, withContent: true), let node = read.row else { return nil }
        return (node, read.sealedContent)
    }

    package func node(in parent: NodeID, nameTag: [UInt8]) throws(VaultError) -> NodeRow? {
        if try knownRowsAnswer(), let known = known.node(in: parent, nameTag: nameTag) { return known }
        guard let row = try db.row("SELECT \(PostgresStorage.countedNodeColumns) FROM vaults LEFT JOIN nodes n "
                                   + "ON n.vault = vaults.name AND n.parent = $2 AND n.name_tag = $3 AND n.id != n.parent WHERE vaults.name = $1",
                                   [name, .integer(parent.rawValue), .bytes(nameTag)]) else { return nil }
        noteCount(row[0].integer)
        let columns = Array(row[1...])
        guard columns[0].integer != nil else {
            if !db.inTransaction || knownVerified { known.noteAbsent(in: parent, nameTag: nameTag) }
            return nil
        }
        let node = try PostgresStorage.readableNodeRow(columns)
        remember(node.id, node)
        return node
    }

    package func children(of parent: NodeID) throws(VaultError) -> [NodeRow] {
        // With the vault's count: the listing is then known whole, and a name not in it is free.
        let rows = try db.rows("SELECT \(PostgresStorage.countedNodeColumns) FROM vaults LEFT JOIN nodes n "
                               + "ON n.vault = vaults.name AND n.parent = $2 AND n.id != n.parent WHERE vaults.name = $1",
                               [name, .integer(parent.rawValue)])
        guard let count = rows.first?[0].integer else { return [] }
        noteCount(count)
        let nodes = try rows.filter { $0[1].integer != nil }.map { (row) throws(VaultError) in try PostgresStorage.readableNodeRow(Array(row[1...])) }
        for node in nodes { remember(node.id, node) }
        if !db.inTransaction || knownVerified { known.noteComplete(parent) }
        return nodes
    }

    package func hasChildren(_ parent: NodeID) throws(VaultError) -> Bool {
        if try knownRowsAnswer(), let known = known.hasEntries(parent) { return known }
        return try db.row("SELECT 1 FROM nodes WHERE vault = $1 AND parent = $2 AND id != parent LIMIT 1", [name, .integer(parent.rawValue)]) != nil
    }

    package func parent(of id: NodeID) throws(VaultError) -> NodeID? {
        if let known = try remembered(id) { return known?.parent }
        return try db.row("SELECT parent FROM nodes WHERE vault = $1 AND id = $2", [name, .integer(id.rawValue)])?.first?.integer.map(NodeID.init)
    }

    package func everyNode() throws(VaultError) -> [StoredNode] {
        try db.rows("SELECT \(PostgresStorage.nodeColumns), content IS NOT NULL FROM nodes WHERE vault = $1 ORDER BY id", [name]).map { row in
            if let node = PostgresStorage.nodeRow(row), let hasContent = row[7].integer {
                return .row(node, hasContent: hasContent == 1)
            }
            return .malformed(id: row[0].integer)
        }
    }

    package func itemCount() throws(VaultError) -> Int {
        Int(try db.integer("SELECT count(*) FROM nodes WHERE vault = $1 AND kind = $2", [name, .integer(NodeKind.item.rawValue)]))
    }

    package func sealedContent(of id: NodeID) throws(VaultError) -> [UInt8]? {
        if try knownRowsAnswer(), let sealed = known.content(of: id) { return sealed }
        return try db.row("SELECT content FROM nodes WHERE vault = $1 AND id = $2", [name, .integer(id.rawValue)])?.first?.bytes
    }

    package func insertNode(_ row: NodeRow, sealedContent: [UInt8]?) throws(VaultError) {
        touched.note(row.id.rawValue, row.parent.rawValue)
        remember(row.id, row)
        rememberContent(row.id, sealedContent)
        // A new folder is empty: every name in it is known to be free.
        if row.kind == NodeKind.dictionary.rawValue, !db.inTransaction || knownVerified { known.noteComplete(row.id) }
        try db.later("INSERT INTO nodes (vault, id, parent, kind, incarnation, name_tag, name, attributes, content) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::bytea)", [
            name, .integer(row.id.rawValue), .integer(row.parent.rawValue), .integer(row.kind), .bytes(row.incarnation),
            .bytes(row.nameTag), .bytes(row.sealedName), .bytes(row.sealedAttributes), sealedContent.map(PGValue.bytes) ?? .null,
        ])
    }

    /// The remembered `id` with other attributes (and place), if remembered.
    private func rememberChanged(_ id: NodeID, parent: NodeID? = nil, nameTag: [UInt8]? = nil, sealedName: [UInt8]? = nil,
                                 sealedAttributes: [UInt8]) {
        guard forgotUnverified(), case .some(.some(let node)) = knownInTransaction(id) else { return }
        remember(id, NodeRow(id: id, parent: parent ?? node.parent, kind: node.kind, incarnation: node.incarnation,
                             nameTag: nameTag ?? node.nameTag, sealedName: sealedName ?? node.sealedName, sealedAttributes: sealedAttributes))
    }

    package func updateAttributes(of id: NodeID, sealedAttributes: [UInt8]) throws(VaultError) {
        touched.note(id.rawValue)
        rememberChanged(id, sealedAttributes: sealedAttributes)
        try db.later("UPDATE nodes SET attributes = $3 WHERE vault = $1 AND id = $2", [name, .integer(id.rawValue), .bytes(sealedAttributes)])
    }

    package func updateAttributesAndContent(of id: NodeID, sealedAttributes: [UInt8], sealedContent: [UInt8]) throws(VaultError) {
        touched.note(id.rawValue)
        rememberChanged(id, sealedAttributes: sealedAttributes)
        rememberContent(id, sealedContent)
        try db.later("UPDATE nodes SET attributes = $3, content = $4 WHERE vault = $1 AND id = $2",
                   [name, .integer(id.rawValue), .bytes(sealedAttributes), .bytes(sealedContent)])
    }

    package func relink(_ id: NodeID, to parent: NodeID, nameTag: [UInt8], sealedName: [UInt8],
                sealedAttributes: [UInt8]) throws(VaultError) {
        // Where the entry left is known when it was read in this transaction: no wait then.
        if case .some(.some(let before)) = knownInTransaction(id) {
            touched.note(id.rawValue, parent.rawValue, before.parent.rawValue)
            rememberChanged(id, parent: parent, nameTag: nameTag, sealedName: sealedName, sealedAttributes: sealedAttributes)
            try db.later("UPDATE nodes SET parent = $3, name_tag = $4, name = $5, attributes = $6 WHERE vault = $1 AND id = $2",
                         [name, .integer(id.rawValue), .integer(parent.rawValue), .bytes(nameTag), .bytes(sealedName), .bytes(sealedAttributes)])
            return
        }
        // Where it was is not known, so neither is which name is free now.
        known.forgetNodes()
        // The joined row is the one before the update: its parent is where the entry left.
        let left = try db.rows("""
            UPDATE nodes SET parent = $3, name_tag = $4, name = $5, attributes = $6 FROM nodes AS before
            WHERE nodes.vault = $1 AND nodes.id = $2 AND before.vault = $1 AND before.id = $2 RETURNING before.parent
            """, [name, .integer(id.rawValue), .integer(parent.rawValue), .bytes(nameTag), .bytes(sealedName), .bytes(sealedAttributes)])
        touched.note(id.rawValue, parent.rawValue)
        for row in left { if let old = row.first?.integer { touched.note(old) } }
    }

    package func deleteNode(_ id: NodeID) throws(VaultError) {
        try deleteContentBlocks(of: id, from: 0)
        if case .some(.some(let node)) = knownInTransaction(id) {
            touched.note(id.rawValue, node.parent.rawValue)
            remember(id, nil)
            try db.later("DELETE FROM nodes WHERE vault = $1 AND id = $2", [name, .integer(id.rawValue)])
            return
        }
        known.forgetNodes()
        for row in try db.rows("DELETE FROM nodes WHERE vault = $1 AND id = $2 RETURNING id, parent", [name, .integer(id.rawValue)]) {
            noteTouched(row)
        }
    }

    /// `id` and every node below it, as a subquery over $1 (vault) and $2 (node).
    private static let subtree = """
        WITH RECURSIVE subtree(id) AS (
            SELECT $2::bigint UNION SELECT nodes.id FROM nodes JOIN subtree ON nodes.vault = $1 AND nodes.parent = subtree.id
        )
        """

    package func deleteSubtree(_ id: NodeID) throws(VaultError) {
        // A folder known to be empty is a node alone: nothing to wait for.
        if db.inTransaction, knownVerified, known.hasEntries(id) == false, case .some(.some(let node)) = known.node(id) {
            try deleteNode(node.id)
            return
        }
        let inWrite = db.inTransaction && knownVerified
        // The blocks go in the same statement: a data-modifying WITH sees the same subtree.
        for row in try db.rows("""
            \(PostgresStorage.subtree), blocks AS (
                DELETE FROM content_blocks WHERE vault = $1 AND node IN (SELECT id FROM subtree)
            )
            DELETE FROM nodes WHERE vault = $1 AND id IN (SELECT id FROM subtree) RETURNING id, parent
            """,
                               [name, .integer(id.rawValue)]) {
            noteTouched(row)
            // Each removed node is known gone (and with it its name, if known).
            if let removed = row[0].integer {
                if inWrite { known.note(NodeID(removed), nil) } else { known.forgetNodes() }
            }
        }
    }

    // MARK: content blocks

    package func contentBlocks(of id: NodeID, in range: Range<Int>) throws(VaultError) -> [ContentBlockRow] {
        try db.rows("SELECT idx, sealed FROM content_blocks WHERE vault = $1 AND node = $2 AND idx >= $3 AND idx < $4 ORDER BY idx",
                    [name, .integer(id.rawValue), .integer(Int64(range.lowerBound)), .integer(Int64(range.upperBound))]).map {
            (row) throws(VaultError) -> ContentBlockRow in
            guard let index = row[0].integer, let sealed = row[1].bytes else {
                throw .integrityFailure("record \(id.rawValue) (malformed content block)")
            }
            return ContentBlockRow(index: Int(index), sealed: sealed)
        }
    }

    package func upsertContentBlock(_ row: ContentBlockRow, of id: NodeID) throws(VaultError) {
        touched.note(id.rawValue)
        try db.later("""
            INSERT INTO content_blocks (vault, node, idx, sealed) VALUES ($1, $2, $3, $4)
            ON CONFLICT (vault, node, idx) DO UPDATE SET sealed = excluded.sealed
            """, [name, .integer(id.rawValue), .integer(Int64(row.index)), .bytes(row.sealed)])
    }

    package func deleteContentBlocks(of id: NodeID, from index: Int) throws(VaultError) {
        try db.later("DELETE FROM content_blocks WHERE vault = $1 AND node = $2 AND idx >= $3",
                     [name, .integer(id.rawValue), .integer(Int64(index))])
    }

    package func orphanContentBlockCount() throws(VaultError) -> Int {
        Int(try db.integer("""
            SELECT count(*) FROM content_blocks AS b
            WHERE b.vault = $1 AND NOT EXISTS (SELECT 1 FROM nodes AS n WHERE n.vault = $1 AND n.id = b.node)
            """, [name]))
    }

    /// A removed node's row (id, parent): both go into the NOTIFY.
    private func noteTouched(_ row: [PGValue]) {
        for column in row { if let id = column.integer { touched.note(id) } }
    }

    // MARK: a node's attributes

    private static let attributeColumns = "node, tag, search_tag, name, value"

    private static func attributeRow(_ row: [PGValue]) -> AttributeRow? {
        guard let node = row[0].integer, let tag = row[1].bytes, let searchTag = row[2].bytes, let name = row[3].bytes,
              let value = row[4].bytes else { return nil }
        return AttributeRow(node: NodeID(node), tag: tag, searchTag: searchTag, sealedName: name, sealedValue: value)
    }

    private func attributeRows(_ sql: String, _ arguments: [PGValue]) throws(VaultError) -> [AttributeRow] {
        try db.rows(sql, arguments).map { (row) throws(VaultError) in
            guard let attribute = PostgresStorage.attributeRow(row) else {
                throw .integrityFailure("an attribute of record \(row[0].integer.map(String.init) ?? "?") (malformed row)")
            }
            return attribute
        }
    }

    package func attribute(of node: NodeID, tag: [UInt8]) throws(VaultError) -> AttributeRow? {
        try attributeRows("SELECT \(PostgresStorage.attributeColumns) FROM attributes WHERE vault = $1 AND node = $2 AND tag = $3",
                          [name, .integer(node.rawValue), .bytes(tag)]).first
    }

    package func attributes(of node: NodeID) throws(VaultError) -> [AttributeRow] {
        try attributeRows("SELECT \(PostgresStorage.attributeColumns) FROM attributes WHERE vault = $1 AND node = $2",
                          [name, .integer(node.rawValue)])
    }

    package func attributes(withSearchTag searchTag: [UInt8]) throws(VaultError) -> [AttributeRow] {
        try attributeRows("SELECT \(PostgresStorage.attributeColumns) FROM attributes WHERE vault = $1 AND search_tag = $2",
                          [name, .bytes(searchTag)])
    }

    package func upsertAttribute(_ row: AttributeRow) throws(VaultError) {
        touched.note(row.node.rawValue)
        try db.later("""
            INSERT INTO attributes (vault, node, tag, search_tag, name, value) VALUES ($1, $2, $3, $4, $5, $6)
            ON CONFLICT (vault, node, tag) DO UPDATE SET search_tag = excluded.search_tag, name = excluded.name, value = excluded.value
            """, [name, .integer(row.node.rawValue), .bytes(row.tag), .bytes(row.searchTag), .bytes(row.sealedName), .bytes(row.sealedValue)])
    }

    package func deleteAttribute(of node: NodeID, tag: [UInt8]) throws(VaultError) -> Bool {
        touched.note(node.rawValue)
        return try db.run("DELETE FROM attributes WHERE vault = $1 AND node = $2 AND tag = $3", [name, .integer(node.rawValue), .bytes(tag)]) > 0
    }

    package func deleteAttributes(of node: NodeID, subtree: Bool) throws(VaultError) {
        touched.note(node.rawValue)
        if subtree {
            try db.later("\(PostgresStorage.subtree) DELETE FROM attributes WHERE vault = $1 AND node IN (SELECT id FROM subtree)",
                         [name, .integer(node.rawValue)])
        } else {
            try db.later("DELETE FROM attributes WHERE vault = $1 AND node = $2", [name, .integer(node.rawValue)])
        }
    }

    package func everyAttribute() throws(VaultError) -> [StoredAttribute] {
        try db.rows("SELECT \(PostgresStorage.attributeColumns) FROM attributes WHERE vault = $1 ORDER BY node", [name]).map { row in
            PostgresStorage.attributeRow(row).map(StoredAttribute.row) ?? .malformed(node: row[0].integer)
        }
    }

    // MARK: access rules

    private func ruleRows(_ sql: String, _ arguments: [PGValue]) throws(VaultError) -> [RuleRow] {
        try db.rows(sql, arguments).map { (row) throws(VaultError) in
            guard let node = row[0].integer, let sealed = row[1].bytes else {
                throw .integrityFailure("the access rules of record \(row[0].integer.map(String.init) ?? "?") (malformed row)")
            }
            return RuleRow(node: NodeID(node), sealed: sealed)
        }
    }

    package func ruleRows() throws(VaultError) -> [RuleRow] {
        try knownRules().sorted { $0.key < $1.key }.map { RuleRow(node: NodeID($0.key), sealed: $0.value) }
    }

    package func upsertRule(_ row: RuleRow) throws(VaultError) {
        touched.note(row.node.rawValue)
        noteRules { $0[row.node.rawValue] = row.sealed }
        try db.later("INSERT INTO rules (vault, node, sealed) VALUES ($1, $2, $3) ON CONFLICT (vault, node) DO UPDATE SET sealed = excluded.sealed",
                   [name, .integer(row.node.rawValue), .bytes(row.sealed)])
    }

    package func deleteRule(of node: NodeID) throws(VaultError) -> Bool {
        touched.note(node.rawValue)
        noteRules { $0[node.rawValue] = nil }
        return try db.run("DELETE FROM rules WHERE vault = $1 AND node = $2", [name, .integer(node.rawValue)]) > 0
    }

    package func deleteRules(of node: NodeID, subtree: Bool) throws(VaultError) -> [RuleRow] {
        touched.note(node.rawValue)
        // An item without rules, as known: nothing to delete, nothing to wait for (a write's
        // lock checks that what is known is true).
        // A folder known to be empty is its subtree alone.
        let alone = !subtree || (db.inTransaction && knownVerified && known.hasEntries(node) == false)
        if alone, db.inTransaction, knownVerified, try knownRules()[node.rawValue] == nil { return [] }
        let deleted: [RuleRow]
        if subtree {
            deleted = try ruleRows("\(PostgresStorage.subtree) DELETE FROM rules WHERE vault = $1 AND node IN (SELECT id FROM subtree) RETURNING node, sealed",
                                   [name, .integer(node.rawValue)])
        } else {
            deleted = try ruleRows("DELETE FROM rules WHERE vault = $1 AND node = $2 RETURNING node, sealed", [name, .integer(node.rawValue)])
        }
        noteRules { for row in deleted { $0[row.node.rawValue] = nil } }
        return deleted
    }

    /// Every node's sealed rules: known, or read with the count (one snapshot) and known since.
    private func knownRules() throws(VaultError) -> [Int64: [UInt8]] {
        if try knownRowsAnswer(), let rules = known.rules { return rules }
        let rows = try db.rows("SELECT vaults.change_count, rules.node, rules.sealed FROM vaults LEFT JOIN rules ON rules.vault = vaults.name "
                               + "WHERE vaults.name = $1", [name])
        guard let count = rows.first?[0].integer else { throw .vaultNotFound(location.displayName) }
        noteCount(count)
        var rules: [Int64: [UInt8]] = [:]
        for row in rows {
            guard let node = row[1].integer else { continue }
            guard let sealed = row[2].bytes else { throw .integrityFailure("the access rules of record \(node) (malformed row)") }
            rules[node] = sealed
        }
        if !db.inTransaction || knownVerified { known.rules = rules }
        return rules
    }

    /// Follows a change of the rules inside a write whose lock found the known rows true;
    /// elsewhere they are forgotten.
    private func noteRules(_ change: (inout [Int64: [UInt8]]) -> Void) {
        guard db.inTransaction, knownVerified, known.rules != nil else {
            known.rules = nil
            return
        }
        change(&known.rules!)
    }

    package func rulesMAC() throws(VaultError) -> [UInt8]? {
        try currentVaultRow()?[3].bytes
    }

    package func setRulesMAC(_ mac: [UInt8]) throws(VaultError) {
        try updateVaultRow("rules_mac = $2", .bytes(mac))
        pending?.rules = mac
        sealedPartsChanged = true
    }

    // MARK: access log

    package func nextAccessLogSequence() throws(VaultError) -> Int64 {
        try db.integer("SELECT coalesce(max(sequence), 0) + 1 FROM access_log WHERE vault = $1", [name])
    }

    package func appendAccessLogBatch(_ row: AccessLogRow) throws(VaultError) {
        try db.later("INSERT INTO access_log (vault, sequence, first_time, last_time, entries, sealed) VALUES ($1, $2, $3, $4, $5, $6)", [
            name, .integer(row.sequence), .integer(row.firstTime), .integer(row.lastTime), .integer(Int64(row.entries)), .bytes(row.sealed),
        ])
    }

    package func replaceAccessLogBatch(sequence: Int64, sealed: [UInt8]) throws(VaultError) {
        try db.later("UPDATE access_log SET sealed = $3 WHERE vault = $1 AND sequence = $2", [name, .integer(sequence), .bytes(sealed)])
    }

    package func sealedAccessLogBatch(sequence: Int64) throws(VaultError) -> [UInt8]? {
        try db.row("SELECT sealed FROM access_log WHERE vault = $1 AND sequence = $2", [name, .integer(sequence)])?[0].bytes
    }

    package func accessLogBatches(since: Int64?, afterSequence: Int64?) throws(VaultError) -> [StoredAccessLogBatch] {
        try db.rows("""
            SELECT sequence, first_time, last_time, entries, sealed FROM access_log
            WHERE vault = $1 AND last_time >= $2 AND sequence > $3 ORDER BY sequence
            """, [name, .integer(since ?? Int64.min), .integer(afterSequence ?? Int64.min)]).map { row in
            if let sequence = row[0].integer, let first = row[1].integer, let last = row[2].integer, let entries = row[3].integer,
               let sealed = row[4].bytes, entries >= 0, entries <= Int64(Int32.max) {
                return .row(AccessLogRow(sequence: sequence, firstTime: first, lastTime: last, entries: Int(entries), sealed: sealed))
            }
            return .malformed(sequence: row[0].integer)
        }
    }

    package func pruneAccessLog(olderThan: Int64, maximumEntries: Int) throws(VaultError) -> Int {
        let newest = "(SELECT max(sequence) FROM access_log WHERE vault = $1)"
        // Always a prefix, as in SQLite's: what is kept stays one run of sequences.
        var deleted = try db.run("""
            DELETE FROM access_log WHERE vault = $1 AND sequence < \(newest)
            AND sequence <= (SELECT max(sequence) FROM access_log WHERE vault = $1 AND last_time < $2)
            """, [name, .integer(olderThan)])
        deleted += try db.run("""
            DELETE FROM access_log WHERE vault = $1 AND sequence < \(newest) AND sequence IN (
                SELECT sequence FROM (
                    SELECT sequence, sum(entries) OVER (ORDER BY sequence DESC) AS total FROM access_log WHERE vault = $1
                ) AS running WHERE total > $2
            )
            """, [name, .integer(Int64(maximumEntries))])
        return deleted
    }

    package func accessLogSummary() throws(VaultError) -> AccessLogSummary {
        guard let row = try db.row("SELECT count(*), coalesce(sum(entries), 0)::bigint, max(sequence) FROM access_log WHERE vault = $1", [name]),
              let batches = row[0].integer, let entries = row[1].integer else {
            throw .storageFailure("PostgreSQL: no result for the access log summary")
        }
        return AccessLogSummary(batches: Int(batches), entries: Int(entries), lastSequence: row[2].integer)
    }
}
