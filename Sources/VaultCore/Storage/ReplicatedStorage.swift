import Glibc
import StoragePostgres
import StorageSQLite
import Synchronization
import SystemCalls

/// A vault in PostgreSQL with an offline replica beside it: every call goes to the server
/// while it answers; once it cannot be reached, reads are answered by the replica (a SQLite
/// vault file holding the server's rows as they were last copied, `ReplicaCopy`) and every
/// change fails with `.offline` (EROFS, exit status 17): nothing is queued. The change under
/// way when the server went keeps the server's own error (its outcome is unknown).
///
/// The replica is brought to the server's records by `refreshReplica` (a mount's
/// `ReplicaKeeper` calls it after each commit heard of, ours or another session's; a command
/// when it closes the vault), and a storage that went offline becomes live again through
/// `adopt`, given a storage connected outside the vault's mutex. A server found at an older
/// generation than the replica (a dump restored) is not served: the replica answers reads and
/// changes fail with `.rolledBack`, as an open of that server fails on a machine that saw the
/// newer generation.
///
/// Called under the vault's mutex, as any storage; the `Sendable` claim rests on it.
final class ReplicatedStorage: VaultStorage, @unchecked Sendable {
    /// The URI as given, and as messages show it.
    let path: String
    let shown: String
    private var primary: PostgresStorage?
    private var replica: SQLiteStorage?
    let replicaPath: String
    private var offlineSince: Int64?
    private var serverRolledBack: (found: Int64, newest: Int64)?
    private var replicaCopiedAt: Int64?
    /// Inside `read`, `write` or `statements`: a lost server is the transaction's to handle.
    private var depth = 0
    /// Set when the primary connected again: the server may be another than it was (a dump
    /// restored), so it is compared with the replica before it answers again.
    private var reconnected = false
    /// Raised at every change between live and offline: the vault's tokens move with it.
    private var epoch: Int64 = 0
    private var othersSeen: StorageChangeToken?
    private var othersCount: Int64 = 0
    private var allSeen: StorageChangeToken?
    private var allCount: Int64 = 0
    private var observer: (@Sendable (StorageConnectionEvent) -> Void)?
    /// Told (under the vault's mutex: it must only signal) after a commit of ours and at a
    /// change between live and offline: the replica is due a copy, or the server a look.
    var onChange: (@Sendable () -> Void)?

    private init(path: String, shown: String, primary: PostgresStorage?, replica: SQLiteStorage?) {
        self.path = path
        self.shown = shown
        self.primary = primary
        self.replica = replica
        replicaPath = OfflineReplicas.path(of: shown)
        primary?.observeConnection(connectionObserver())
    }

    static func create(at path: String, _ populate: (PostgresStorage) throws(VaultError) -> Void) throws(VaultError) -> ReplicatedStorage {
        let primary = try PostgresStorage.create(at: path, populate)
        let shown = VaultLocation.displayName(path)
        // A replica left by a vault of the same name before is another vault's: the first copy replaces it.
        VaultFiles.removeVaultFiles(OfflineReplicas.path(of: shown))
        return ReplicatedStorage(path: path, shown: shown, primary: primary, replica: nil)
    }

    /// The server's storage, or, when it cannot be reached and a replica exists, the replica
    /// alone (offline from the start). Without a replica the server's error stands.
    static func open(at path: String) throws(VaultError) -> ReplicatedStorage {
        let shown = VaultLocation.displayName(path)
        let replicaPath = OfflineReplicas.path(of: shown)
        do throws(VaultError) {
            // A command opens its vault twice (a check, then the open): the second does not
            // wait out another connect timeout for a server the first just found unreachable.
            if ReplicatedStorage.monotonicMilliseconds() - ReplicatedStorage.foundUnreachable.load(ordering: .acquiring)
                < ReplicatedStorage.unreachableMemoryMilliseconds {
                throw .storageUnreachable("\(shown): found unreachable a moment ago")
            }
            let primary = try PostgresStorage.open(at: path)
            return ReplicatedStorage(path: path, shown: shown, primary: primary, replica: try? SQLiteStorage.open(at: replicaPath))
        } catch .storageUnreachable(let reason) {
            ReplicatedStorage.foundUnreachable.store(ReplicatedStorage.monotonicMilliseconds(), ordering: .releasing)
            guard let replica = try? SQLiteStorage.open(at: replicaPath) else { throw .storageUnreachable(reason) }
            let storage = ReplicatedStorage(path: path, shown: shown, primary: nil, replica: replica)
            storage.offlineSince = ReplicatedStorage.now()
            storage.replicaCopiedAt = ReplicatedStorage.modified(replicaPath)
            return storage
        }
    }

    private static func now() -> Int64 { Int64(time(nil)) }

    /// When (`monotonicMilliseconds`) an open in this process last found its server
    /// unreachable; a process opens one vault.
    private static let foundUnreachable = Atomic<Int64>(Int64.min / 2)
    private static let unreachableMemoryMilliseconds: Int64 = 2_000

    private static func monotonicMilliseconds() -> Int64 { Int64(SystemCall.monotonicSeconds() * 1_000) }

    /// When the replica file was last written: what its age is counted from when this process
    /// has not copied it itself.
    private static func modified(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path + "-wal", &info) == 0 || stat(path, &info) == 0 else { return nil }
        return Int64(info.st_mtim.tv_sec)
    }

    private func connectionObserver() -> @Sendable (StorageConnectionEvent) -> Void {
        { [weak self] event in
            guard let self else { return }
            if event == .restored { self.reconnected = true }
            // With a replica, a loss is not calls failing but the vault going offline, which
            // its watcher says (`ReplicaKeeper`); told as a failure it would contradict that.
            guard self.replica == nil else { return }
            self.observer?(event)
        }
    }

    // MARK: live and offline

    var state: OfflineState {
        OfflineState(offlineSince: offlineSince, replicaCopiedAt: replicaCopiedAt, serverRolledBack: serverRolledBack)
    }

    /// The server, while it is the one to answer.
    private var live: PostgresStorage? {
        offlineSince == nil && serverRolledBack == nil ? primary : nil
    }

    /// What a change is refused with while the server is not live.
    private var refusal: VaultError {
        serverRolledBack.map { .rolledBack(path: shown, found: $0.found, newest: $0.newest) } ?? .offline(shown)
    }

    /// Serves from the replica from now on, when there is one to serve from.
    private func goOffline() -> Bool {
        guard replica != nil else { return false }
        if offlineSince == nil {
            offlineSince = ReplicatedStorage.now()
            epoch += 1
            onChange?()
        }
        return true
    }

    private func offlineReplica() throws(VaultError) -> SQLiteStorage {
        guard let replica else { throw .storageUnreachable("\(shown): no replica of it on this machine") }
        return replica
    }

    /// Once the primary connected again, before it answers: a server older than the replica
    /// (whose state the vault's key authenticates) is not served.
    private func checkReconnected(_ server: PostgresStorage) throws(VaultError) {
        guard reconnected, depth == 0 else { return }
        // Cleared once compared: a server that cannot answer yet is compared at the next call.
        try compareWithReplica(server, accepting: false)
        reconnected = false
    }

    /// Refuses (`.rolledBack`, and serves the replica from now on) a server whose generation is
    /// older than the replica's; with `accepting`, makes the replica the server's instead.
    private func compareWithReplica(_ server: PostgresStorage, accepting: Bool) throws(VaultError) {
        guard let replica, let cipher = generationCipher as? RecordCipher, let local = try? replica.vaultState(),
              cipher.stateMACMatches(local), let found = try server.readAfresh({ () throws(VaultError) in try server.vaultState() }),
              found.generation < local.generation else { return }
        if accepting {
            _ = try ReplicaCopy.refresh(from: server, into: replica, cipher: cipher, accepting: true, shown: shown)
            replicaCopiedAt = ReplicatedStorage.now()
            return
        }
        serverRolledBack = (found.generation, local.generation)
        epoch += 1
        onChange?()
    }

    /// Throws what a change would be refused with while the server is not live.
    func refuseChangesWhileNotLive() throws(VaultError) {
        guard live != nil else { throw refusal }
    }

    /// At open, once the vault's key is here: the server checked against the replica.
    func checkAtOpen(accepting: Bool) throws(VaultError) {
        guard let server = live else { return }
        try compareWithReplica(server, accepting: accepting)
        if let rolledBack = serverRolledBack { throw .rolledBack(path: shown, found: rolledBack.found, newest: rolledBack.newest) }
    }

    /// Brings the replica to the server's records (made on the first call); nothing to do
    /// while offline. False when it was current.
    @discardableResult
    func refreshReplica() throws(VaultError) -> Bool {
        guard let server = live, depth == 0 else { return false }
        try checkReconnected(server)
        guard serverRolledBack == nil else { return false }
        let cipher = generationCipher as? RecordCipher
        do throws(VaultError) {
            let copied: Bool
            if let replica {
                copied = try ReplicaCopy.refresh(from: server, into: replica, cipher: cipher, accepting: false, shown: shown)
            } else {
                let made = try makeReplica(from: server)
                copied = try ReplicaCopy.refresh(from: server, into: made, cipher: cipher, accepting: false, shown: shown)
                replica = made
            }
            replicaCopiedAt = ReplicatedStorage.now()
            return copied
        } catch .storageUnreachable(let reason) {
            _ = goOffline()
            throw .storageUnreachable(reason)
        } catch .rolledBack(let path, let found, let newest) {
            serverRolledBack = (found, newest)
            epoch += 1
            onChange?()
            throw .rolledBack(path: path, found: found, newest: newest)
        }
    }

    /// The replica's file, made with the server's records when there is none (another process
    /// of this user may have made it meanwhile: then that one). A file there that does not
    /// open as a vault is a cache entry gone bad: replaced.
    private func makeReplica(from server: PostgresStorage) throws(VaultError) -> SQLiteStorage {
        do throws(VaultError) {
            return try SQLiteStorage.open(at: replicaPath)
        } catch .vaultNotFound {
        } catch .notAVault(_, let reason) {
            // Empty: another process is making it now (its first transaction fills it whole).
            guard reason != "the file is empty" else { throw .storageFailure("\(replicaPath) is being made by another process") }
            VaultFiles.removeVaultFiles(replicaPath)
        }
        do throws(VaultError) {
            return try SQLiteStorage.create(at: replicaPath) { (replica) throws(VaultError) in
                try ReplicaCopy.fill(replica, from: server, shown: shown)
            }
        } catch .vaultExists {
            return try SQLiteStorage.open(at: replicaPath)
        }
    }

    /// Takes `server`, connected again outside the vault's mutex, as the live storage, once
    /// it is no older than the replica; the replica is copied to it. False: still offline.
    func adopt(_ server: PostgresStorage) -> Bool {
        guard offlineSince != nil, serverRolledBack == nil else { return false }
        server.generationCipher = generationCipher
        let cipher = generationCipher as? RecordCipher
        if let replica {
            do throws(VaultError) {
                _ = try ReplicaCopy.refresh(from: server, into: replica, cipher: cipher, accepting: false, shown: shown)
                replicaCopiedAt = ReplicatedStorage.now()
            } catch .rolledBack(_, let found, let newest) {
                serverRolledBack = (found, newest)
                epoch += 1
                return false
            } catch {
                // Copied at the next commit heard of; being live does not wait for it.
            }
        }
        server.observeConnection(connectionObserver())
        primary = server
        offlineSince = nil
        reconnected = false
        epoch += 1
        return true
    }

    /// `body` on the server while live; on the replica offline, or when the server is found
    /// unreachable outside a transaction.
    private func reading<R: ~Copyable>(_ body: (any VaultStorage) throws(VaultError) -> R) throws(VaultError) -> R {
        if let primary = live {
            do throws(VaultError) {
                try checkReconnected(primary)
                if live != nil { return try body(primary) }
            } catch .storageUnreachable(let reason) {
                guard depth == 0, goOffline() else { throw .storageUnreachable(reason) }
            }
        }
        return try body(try offlineReplica())
    }

    /// A change: the server's while live, refused otherwise.
    private func changing<R: ~Copyable>(_ server: (PostgresStorage) throws(VaultError) -> R) throws(VaultError) -> R {
        guard let primary = live else { throw refusal }
        return try server(primary)
    }

    /// A transaction on the server while live; a server lost in it (outside any other) means
    /// the body runs again, on the replica.
    private func transaction<R: ~Copyable>(_ body: (any VaultStorage) throws(VaultError) -> R) throws(VaultError) -> R {
        guard depth == 0 else {
            // Nested (a read inside a write): the enclosing transaction's storage.
            if let primary = live { return try body(primary) }
            return try body(try offlineReplica())
        }
        if let primary = live {
            do throws(VaultError) {
                try checkReconnected(primary)
                if let primary = live {
                    depth += 1
                    defer { depth -= 1 }
                    return try body(primary)
                }
            } catch .storageUnreachable(let reason) {
                guard goOffline() else { throw .storageUnreachable(reason) }
            }
        }
        depth += 1
        defer { depth -= 1 }
        return try body(try offlineReplica())
    }

    // MARK: transactions

    func write<R: ~Copyable>(_ durability: CommitDurability, seenByChangeToken: Bool,
                             _ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        guard let primary = live else { throw refusal }
        if depth == 0 { try checkReconnected(primary) }
        guard live != nil else { throw refusal }
        depth += 1
        defer { depth -= 1 }
        do throws(VaultError) {
            let result = try primary.write(durability, seenByChangeToken: seenByChangeToken, body)
            onChange?()
            return result
        } catch .storageUnreachable(let reason) {
            _ = goOffline()
            throw .storageUnreachable(reason)
        }
    }

    func read<R: ~Copyable>(_ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        try transaction { (storage) throws(VaultError) -> R in try storage.read(body) }
    }

    func statements<R: ~Copyable>(_ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        try transaction { (storage) throws(VaultError) -> R in try storage.statements(body) }
    }

    func syncCarriedCommits() throws(VaultError) {
        try changing { (server) throws(VaultError) in try server.syncCarriedCommits() }
    }

    var syncsAlongsideCommits: Bool { false }
    var isShared: Bool { true }

    func syncAlongsideCommits() throws(VaultError) {
        try syncCarriedCommits()
    }

    func reclaimFreeSpace(trimmingLog: Bool, continuing: Bool) throws(VaultError) -> Bool { false }

    func changeToken() throws(VaultError) -> StorageChangeToken {
        if let primary = live {
            do throws(VaultError) {
                let token = try primary.changeToken()
                if token != allSeen {
                    allSeen = token
                    allCount += 1
                }
                try checkReconnected(primary)
            } catch .storageUnreachable(let reason) {
                guard depth == 0, goOffline() else { throw .storageUnreachable(reason) }
            }
        }
        return StorageChangeToken(epoch, allCount)
    }

    func othersChangeToken() throws(VaultError) -> StorageChangeToken {
        if let primary = live {
            do throws(VaultError) {
                let token = try primary.othersChangeToken()
                if token != othersSeen {
                    othersSeen = token
                    othersCount += 1
                }
                try checkReconnected(primary)
            } catch .storageUnreachable(let reason) {
                guard depth == 0, goOffline() else { throw .storageUnreachable(reason) }
            }
        }
        return StorageChangeToken(epoch, othersCount)
    }

    // MARK: the primary's own

    func changeListener() -> VaultChangeListener? {
        if let primary { return primary.changeListener() }
        return try? PostgresStorage.changeListener(at: path)
    }

    func observeConnection(_ observer: @escaping @Sendable (StorageConnectionEvent) -> Void) {
        self.observer = observer
    }

    // MARK: format

    func formatVersion() throws(VaultError) -> Int {
        try reading { (s) throws(VaultError) in try s.formatVersion() }
    }

    func setFormatVersion(_ version: Int) throws(VaultError) {
        try changing { (s) throws(VaultError) in try s.setFormatVersion(version) }
    }

    func prepareStorage(forFormatVersion version: Int) throws(VaultError) {
        try changing { (s) throws(VaultError) in try s.prepareStorage(forFormatVersion: version) }
    }

    // MARK: header

    func insertHeader(_ header: VaultHeader, firstNodeID: NodeID) throws(VaultError) {
        try changing { (s) throws(VaultError) in try s.insertHeader(header, firstNodeID: firstNodeID) }
    }

    func header() throws(VaultError) -> VaultHeader? {
        try reading { (s) throws(VaultError) in try s.header() }
    }

    func updateHeaderMAC(_ mac: [UInt8]) throws(VaultError) {
        try changing { (s) throws(VaultError) in try s.updateHeaderMAC(mac) }
    }

    func allocateNodeID() throws(VaultError) -> NodeID {
        try changing { (s) throws(VaultError) in try s.allocateNodeID() }
    }

    func nextNodeID() throws(VaultError) -> NodeID? {
        try reading { (s) throws(VaultError) in try s.nextNodeID() }
    }

    // MARK: key slots

    func keySlots() throws(VaultError) -> [KeySlotRow] {
        try reading { (s) throws(VaultError) in try s.keySlots() }
    }

    func upsertKeySlot(_ slot: KeySlotRow) throws(VaultError) {
        try changing { (s) throws(VaultError) in try s.upsertKeySlot(slot) }
    }

    func deleteKeySlot(id: Int64) throws(VaultError) -> Bool {
        try changing { (s) throws(VaultError) in try s.deleteKeySlot(id: id) }
    }

    func pinSlots() throws(VaultError) -> [PINSlotRow] {
        try reading { (s) throws(VaultError) in try s.pinSlots() }
    }

    func upsertPINSlot(_ slot: PINSlotRow) throws(VaultError) {
        try changing { (s) throws(VaultError) in try s.upsertPINSlot(slot) }
    }

    func deletePINSlot(id: Int64) throws(VaultError) -> Bool {
        try changing { (s) throws(VaultError) in try s.deletePINSlot(id: id) }
    }

    func memberSlots() throws(VaultError) -> [MemberSlotRow] {
        try reading { (s) throws(VaultError) in try s.memberSlots() }
    }

    func insertMemberSlot(_ slot: MemberSlotRow) throws(VaultError) {
        try changing { (s) throws(VaultError) in try s.insertMemberSlot(slot) }
    }

    func deleteMemberSlot(named name: [UInt8]) throws(VaultError) -> Bool {
        try changing { (s) throws(VaultError) in try s.deleteMemberSlot(named: name) }
    }

    // MARK: nodes

    func node(_ id: NodeID) throws(VaultError) -> NodeRow? {
        try reading { (s) throws(VaultError) in try s.node(id) }
    }

    func node(in parent: NodeID, nameTag: [UInt8]) throws(VaultError) -> NodeRow? {
        try reading { (s) throws(VaultError) in try s.node(in: parent, nameTag: nameTag) }
    }

    func children(of parent: NodeID) throws(VaultError) -> [NodeRow] {
        try reading { (s) throws(VaultError) in try s.children(of: parent) }
    }

    func hasChildren(_ parent: NodeID) throws(VaultError) -> Bool {
        try reading { (s) throws(VaultError) in try s.hasChildren(parent) }
    }

    func parent(of id: NodeID) throws(VaultError) -> NodeID? {
        try reading { (s) throws(VaultError) in try s.parent(of: id) }
    }

    func everyNode() throws(VaultError) -> [StoredNode] {
        try reading { (s) throws(VaultError) in try s.everyNode() }
    }

    func itemCount() throws(VaultError) -> Int {
        try reading { (s) throws(VaultError) in try s.itemCount() }
    }

    func sealedContent(of id: NodeID) throws(VaultError) -> [UInt8]? {
        try reading { (s) throws(VaultError) in try s.sealedContent(of: id) }
    }

    func nodeAndContent(_ id: NodeID) throws(VaultError) -> (row: NodeRow, sealedContent: [UInt8]?)? {
        try reading { (s) throws(VaultError) in try s.nodeAndContent(id) }
    }

    func insertNode(_ row: NodeRow, sealedContent: [UInt8]?) throws(VaultError) {
        try changing { (s) throws(VaultError) in try s.insertNode(row, sealedContent: sealedContent) }
    }

    func updateAttributes(of id: NodeID, sealedAttributes: [UInt8]) throws(VaultError) {
        try changing { (s) throws(VaultError) in try s.updateAttributes(of: id, sealedAttributes: sealedAttributes) }
    }

    func updateAttributesAndContent(of id: NodeID, sealedAttributes: [UInt8], sealedContent: [UInt8]) throws(VaultError) {
        try changing { (s) throws(VaultError) in
            try s.updateAttributesAndContent(of: id, sealedAttributes: sealedAttributes, sealedContent: sealedContent)
        }
    }

    func relink(_ id: NodeID, to parent: NodeID, nameTag: [UInt8], sealedName: [UInt8], sealedAttributes: [UInt8]) throws(VaultError) {
        try changing { (s) throws(VaultError) in
            try s.relink(id, to: parent, nameTag: nameTag, sealedName: sealedName, sealedAttributes: sealedAttributes)
        }
    }

    func deleteNode(_ id: NodeID) throws(VaultError) {
        try changing { (s) throws(VaultError) in try s.deleteNode(id) }
    }

    func deleteSubtree(_ id: NodeID) throws(VaultError) {
        try changing { (s) throws(VaultError) in try s.deleteSubtree(id) }
    }

    // MARK: content blocks

    func contentBlocks(of id: NodeID, in range: Range<Int>) throws(VaultError) -> [ContentBlockRow] {
        try reading { (s) throws(VaultError) in try s.contentBlocks(of: id, in: range) }
    }

    func upsertContentBlock(_ row: ContentBlockRow, of id: NodeID) throws(VaultError) {
        try changing { (s) throws(VaultError) in try s.upsertContentBlock(row, of: id) }
    }

    func deleteContentBlocks(of id: NodeID, from index: Int) throws(VaultError) {
        try changing { (s) throws(VaultError) in try s.deleteContentBlocks(of: id, from: index) }
    }

    func orphanContentBlockCount() throws(VaultError) -> Int {
        try reading { (s) throws(VaultError) in try s.orphanContentBlockCount() }
    }

    // MARK: attributes

    func attribute(of node: NodeID, tag: [UInt8]) throws(VaultError) -> AttributeRow? {
        try reading { (s) throws(VaultError) in try s.attribute(of: node, tag: tag) }
    }

    func attributes(of node: NodeID) throws(VaultError) -> [AttributeRow] {
        try reading { (s) throws(VaultError) in try s.attributes(of: node) }
    }

    func attributes(withSearchTag searchTag: [UInt8]) throws(VaultError) -> [AttributeRow] {
        try reading { (s) throws(VaultError) in try s.attributes(withSearchTag: searchTag) }
    }

    func upsertAttribute(_ row: AttributeRow) throws(VaultError) {
        try changing { (s) throws(VaultError) in try s.upsertAttribute(row) }
    }

    func deleteAttribute(of node: NodeID, tag: [UInt8]) throws(VaultError) -> Bool {
        try changing { (s) throws(VaultError) in try s.deleteAttribute(of: node, tag: tag) }
    }

    func deleteAttributes(of node: NodeID, subtree: Bool) throws(VaultError) {
        try changing { (s) throws(VaultError) in try s.deleteAttributes(of: node, subtree: subtree) }
    }

    func everyAttribute() throws(VaultError) -> [StoredAttribute] {
        try reading { (s) throws(VaultError) in try s.everyAttribute() }
    }

    // MARK: access rules

    func ruleRows() throws(VaultError) -> [RuleRow] {
        try reading { (s) throws(VaultError) in try s.ruleRows() }
    }

    func upsertRule(_ row: RuleRow) throws(VaultError) {
        try changing { (s) throws(VaultError) in try s.upsertRule(row) }
    }

    func deleteRule(of node: NodeID) throws(VaultError) -> Bool {
        try changing { (s) throws(VaultError) in try s.deleteRule(of: node) }
    }

    func deleteRules(of node: NodeID, subtree: Bool) throws(VaultError) -> [RuleRow] {
        try changing { (s) throws(VaultError) in try s.deleteRules(of: node, subtree: subtree) }
    }

    func rulesMAC() throws(VaultError) -> [UInt8]? {
        try reading { (s) throws(VaultError) in try s.rulesMAC() }
    }

    func setRulesMAC(_ mac: [UInt8]) throws(VaultError) {
        try changing { (s) throws(VaultError) in try s.setRulesMAC(mac) }
    }

    // MARK: generation

    /// The server's alone: the replica's generation is copied, never raised or sealed here.
    var generationCipher: (any GenerationSealer)? {
        didSet { primary?.generationCipher = generationCipher }
    }

    var sealedPartsChanged: Bool { primary?.sealedPartsChanged ?? false }

    var lastSealedGeneration: Int64? { primary?.lastSealedGeneration }

    func vaultState() throws(VaultError) -> VaultState? {
        try reading { (s) throws(VaultError) in try s.vaultState() }
    }

    func setMembersMAC(_ mac: [UInt8]) throws(VaultError) {
        try changing { (s) throws(VaultError) in try s.setMembersMAC(mac) }
    }

    func raiseGeneration(sealedBy cipher: any GenerationSealer) throws(VaultError) {
        try changing { (s) throws(VaultError) in try s.raiseGeneration(sealedBy: cipher) }
    }

    // MARK: access log (the server's only: the replica holds none)

    func nextAccessLogSequence() throws(VaultError) -> Int64 {
        try changing { (s) throws(VaultError) in try s.nextAccessLogSequence() }
    }

    func appendAccessLogBatch(_ row: AccessLogRow) throws(VaultError) {
        try changing { (s) throws(VaultError) in try s.appendAccessLogBatch(row) }
    }

    func replaceAccessLogBatch(sequence: Int64, sealed: [UInt8]) throws(VaultError) {
        try changing { (s) throws(VaultError) in try s.replaceAccessLogBatch(sequence: sequence, sealed: sealed) }
    }

    /// Read from the server alone: offline, the log is not there to read, which is said rather
    /// than shown empty.
    private func loggedOnServer<R>(_ server: (PostgresStorage) throws(VaultError) -> R) throws(VaultError) -> R {
        guard let primary = live else {
            throw .storageUnreachable("\(shown): offline, and its access log is kept on the server only (not in the replica)")
        }
        return try server(primary)
    }

    func accessLogBatches(since: Int64?, afterSequence: Int64?) throws(VaultError) -> [StoredAccessLogBatch] {
        try loggedOnServer { (s) throws(VaultError) in try s.accessLogBatches(since: since, afterSequence: afterSequence) }
    }

    func sealedAccessLogBatch(sequence: Int64) throws(VaultError) -> [UInt8]? {
        try loggedOnServer { (s) throws(VaultError) in try s.sealedAccessLogBatch(sequence: sequence) }
    }

    func pruneAccessLog(olderThan: Int64, maximumEntries: Int) throws(VaultError) -> Int {
        try changing { (s) throws(VaultError) in try s.pruneAccessLog(olderThan: olderThan, maximumEntries: maximumEntries) }
    }

    func accessLogSummary() throws(VaultError) -> AccessLogSummary {
        try loggedOnServer { (s) throws(VaultError) in try s.accessLogSummary() }
    }
}
