import CSodium
import Glibc
import Synchronization

/// An open vault: one SQLite connection and, while unlocked, the keys. Safe to call from
/// any thread (FUSE workers included); calls are serialised by a mutex and each change is one
/// durable SQLite transaction, so other processes using the same file see whole changes only.
public final class Vault: Sendable {
    public let path: String
    public let itemSizeLimit: Int
    private let state: Mutex<State>

    private struct State {
        let db: SQLiteConnection
        /// nil while locked.
        var cipher: RecordCipher?
        /// The key slot the current passphrase opened.
        var slotID: Int64
    }

    private init(path: String, itemSizeLimit: Int, db: sending SQLiteConnection, cipher: sending RecordCipher, slotID: Int64) {
        self.path = path
        self.itemSizeLimit = itemSizeLimit
        state = Mutex(State(db: db, cipher: cipher, slotID: slotID))
    }

    // MARK: creating and opening

    public static let defaultItemSizeLimit = VaultFormat.defaultItemSizeLimit
    public static let maximumItemSizeLimit = 64 << 20

    /// Creates a new vault file (0600, parent directories 0700); refuses to touch an existing file.
    public static func create(at path: String, passphrase: borrowing SecureBuffer, kdf: KDFParameters,
                              itemSizeLimit: Int = defaultItemSizeLimit) throws(VaultError) -> Vault {
        guard passphrase.count > 0 else { throw .invalidArgument("the passphrase is empty") }
        guard (1...maximumItemSizeLimit).contains(itemSizeLimit) else {
            throw .invalidArgument("the item size limit must be between 1 and \(maximumItemSizeLimit) bytes")
        }
        try FileSystem.createParentDirectories(of: path)
        try FileSystem.createEmptyPrivateFile(path)
        do {
            let db = try SQLiteConnection(path: path, create: false)
            try db.execute("PRAGMA journal_mode = WAL")
            try db.execute(VaultFormat.connectionPragmas)
            let vaultID = randomBytes(VaultFormat.vaultIDBytes)
            let master = try KeyDerivation.randomMasterKey()
            let cipher = try RecordCipher(vaultID: vaultID, master: master)
            let slot = try sealKeySlot(master: master, passphrase: passphrase, parameters: kdf, slotID: 1)
            try db.writeTransaction { () throws(VaultError) in
                try db.execute("PRAGMA application_id = \(VaultFormat.applicationID); PRAGMA user_version = \(VaultFormat.version);")
                try db.execute(VaultFormat.schema)
                try db.run("INSERT INTO vault (singleton, vault_id, item_size_limit, next_node_id, header_mac) VALUES (1, ?, ?, ?, ?)",
                           [.blob(vaultID), .integer(Int64(itemSizeLimit)), .integer(NodeID.root.rawValue + 1),
                            .blob(cipher.headerMAC(itemSizeLimit: itemSizeLimit))])
                try writeKeySlot(slot, id: 1, parameters: kdf, db: db)
                let now = Timestamp.now()
                let rootAttributes = NodeAttributes(kind: .dictionary, mode: 0o700, size: 0, modified: now, changed: now, contentGeneration: 0)
                let root = RecordPlace.new(.root)
                try db.run("INSERT INTO nodes (id, parent, kind, incarnation, name_tag, name, attributes, content) VALUES (?, ?, ?, ?, ?, x'', ?, NULL)", [
                    .integer(NodeID.root.rawValue), .integer(0), .integer(NodeKind.dictionary.rawValue), .blob(root.incarnation),
                    .blob([UInt8](repeating: 0, count: 32)), .blob(cipher.sealAttributes(rootAttributes, root)),
                ])
            }
            try FileSystem.syncDirectory(containing: path)
            return Vault(path: path, itemSizeLimit: itemSizeLimit, db: db, cipher: cipher, slotID: 1)
        } catch {
            FileSystem.removeVaultFiles(path)
            throw error
        }
    }

    /// Opens an existing vault with a passphrase.
    public static func open(at path: String, passphrase: borrowing SecureBuffer) throws(VaultError) -> Vault {
        let db = try openDatabase(at: path)
        let (vaultID, itemSizeLimit, storedMAC) = try readHeader(db, path: path)
        var unlockedMaster: SecureBuffer? = nil
        var unlockedSlot: Int64 = 0
        let slots = try db.rows("SELECT id, kdf_algorithm, kdf_opslimit, kdf_memlimit, salt, wrapped_master_key FROM key_slots ORDER BY id")
        guard !slots.isEmpty else { throw .integrityFailure("key slots (none left)") }
        for slot in slots {
            guard let id = slot[0].integer, let algorithm = slot[1].integer, let ops = slot[2].integer,
                  let mem = slot[3].integer, let salt = slot[4].blob, let wrapped = slot[5].blob else {
                throw .integrityFailure("key slot (malformed row)")
            }
            var parameters = KDFParameters(opsLimit: UInt64(bitPattern: ops), memLimit: UInt64(bitPattern: mem))
            parameters.algorithm = algorithm
            let kek = try KeyDerivation.keyEncryptionKey(passphrase: passphrase, salt: salt, parameters: parameters)
            var master = try SecureBuffer(capacity: KeyDerivation.masterKeyBytes)
            let ad = RecordCipher.slotAssociatedData(slotID: id, parameters: parameters)
            if AEAD.open(wrapped, key: kek, associatedData: ad, into: &master), master.count == KeyDerivation.masterKeyBytes {
                unlockedMaster = consume master
                unlockedSlot = id
                break
            }
        }
        guard let master = unlockedMaster.take() else { throw .wrongPassphrase }
        let cipher = try RecordCipher(vaultID: vaultID, master: master)
        guard cipher.headerMACMatches(storedMAC, itemSizeLimit: itemSizeLimit) else {
            throw .integrityFailure("vault header")
        }
        return Vault(path: path, itemSizeLimit: itemSizeLimit, db: db, cipher: cipher, slotID: unlockedSlot)
    }

    /// Checks that `path` holds a vault of a known format, without unlocking it.
    public static func checkOpenable(at path: String) throws(VaultError) {
        _ = try openDatabase(at: path)
    }

    private static func openDatabase(at path: String) throws(VaultError) -> SQLiteConnection {
        var info = stat()
        guard stat(path, &info) == 0 else {
            if errno == ENOENT { throw .vaultNotFound(path) }
            throw .storageFailure("\(path): \(String(cString: strerror(errno)))")
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
        let version = Int(try db.integer("PRAGMA user_version"))
        guard version <= VaultFormat.version else {
            throw .unknownFormatVersion(found: version, supported: VaultFormat.version)
        }
        guard version >= 1 else { throw .notAVault(path: path, reason: "format version \(version)") }
        if try db.row("PRAGMA journal_mode")?.first?.blob != Array("wal".utf8) {
            try db.execute("PRAGMA journal_mode = WAL")
        }
        try db.execute(VaultFormat.connectionPragmas)
        return db
    }

    private static func readHeader(_ db: SQLiteConnection, path: String) throws(VaultError) -> ([UInt8], Int, [UInt8]) {
        guard let row = try db.row("SELECT vault_id, item_size_limit, header_mac FROM vault WHERE singleton = 1"),
              let vaultID = row[0].blob, vaultID.count == VaultFormat.vaultIDBytes,
              let limit = row[1].integer, limit > 0, limit <= Int64(maximumItemSizeLimit),
              let mac = row[2].blob else {
            throw .integrityFailure("vault header")
        }
        return (vaultID, Int(limit), mac)
    }

    private static func sealKeySlot(master: borrowing SecureBuffer, passphrase: borrowing SecureBuffer, parameters: KDFParameters,
                                    slotID: Int64) throws(VaultError) -> (salt: [UInt8], wrapped: [UInt8]) {
        let salt = randomBytes(KeyDerivation.saltBytes)
        let kek = try KeyDerivation.keyEncryptionKey(passphrase: passphrase, salt: salt, parameters: parameters)
        let ad = RecordCipher.slotAssociatedData(slotID: slotID, parameters: parameters)
        let wrapped = master.withUnsafeBytes { AEAD.seal($0, key: kek, associatedData: ad) }
        return (salt, wrapped)
    }

    private static func writeKeySlot(_ slot: (salt: [UInt8], wrapped: [UInt8]), id: Int64, parameters: KDFParameters,
                                     db: SQLiteConnection) throws(VaultError) {
        try db.run("INSERT OR REPLACE INTO key_slots (id, kdf_algorithm, kdf_opslimit, kdf_memlimit, salt, wrapped_master_key) VALUES (?, ?, ?, ?, ?, ?)", [
            .integer(id), .integer(parameters.algorithm), .integer(Int64(bitPattern: parameters.opsLimit)),
            .integer(Int64(bitPattern: parameters.memLimit)), .blob(slot.salt), .blob(slot.wrapped),
        ])
    }

    // MARK: passphrase

    /// Rewraps the master key under a new passphrase in the slot the current one opened;
    /// nothing else is re-encrypted. One transaction: a crash leaves the old or the new slot.
    public func changePassphrase(to newPassphrase: borrowing SecureBuffer, kdf: KDFParameters? = nil) throws(VaultError) {
        guard newPassphrase.count > 0 else { throw .invalidArgument("the new passphrase is empty") }
        try state.withLock { (state) throws(VaultError) in
            guard let cipher = state.cipher else { throw .locked }
            let slotID = state.slotID
            var parameters = kdf
            if parameters == nil, let row = try state.db.row("SELECT kdf_opslimit, kdf_memlimit FROM key_slots WHERE id = ?", [.integer(slotID)]),
               let ops = row[0].integer, let mem = row[1].integer {
                parameters = KDFParameters(opsLimit: UInt64(bitPattern: ops), memLimit: UInt64(bitPattern: mem))
            }
            let chosen = parameters ?? KDFPreset.moderate.parameters
            let slot = try cipher.withMasterKey { (master) throws(VaultError) in
                try Vault.sealKeySlot(master: master, passphrase: newPassphrase, parameters: chosen, slotID: slotID)
            }
            let db = state.db
            try db.writeTransaction { () throws(VaultError) in
                try Vault.writeKeySlot(slot, id: slotID, parameters: chosen, db: db)
            }
        }
    }

    // MARK: lock state

    public var isLocked: Bool { state.withLock { $0.cipher == nil } }

    /// Drops every key; operations fail with `.locked` until `unlock`.
    public func lock() {
        state.withLock { $0.cipher = nil }
    }

    /// Re-derives the keys from the passphrase; a wrong one leaves the vault locked.
    public func unlock(passphrase: borrowing SecureBuffer) throws(VaultError) {
        let reopened = try Vault.open(at: path, passphrase: passphrase)
        let (cipher, slotID) = reopened.state.withLock { (s) -> (RecordCipher?, Int64) in (s.cipher, s.slotID) }
        state.withLock {
            $0.cipher = cipher
            $0.slotID = slotID
        }
    }

    /// How many items the vault holds; readable while locked (the file shows it to anyone).
    public func itemCount() throws(VaultError) -> Int {
        try state.withLock { (state) throws(VaultError) -> Int in
            Int(try state.db.integer("SELECT count(*) FROM nodes WHERE kind = \(NodeKind.item.rawValue)"))
        }
    }

    // MARK: running operations

    /// Runs `body` with the node store while unlocked, inside the vault's mutex.
    func withStore<R: ~Copyable>(_ body: (NodeStore) throws(VaultError) -> R) throws(VaultError) -> R {
        try state.withLock { (state) throws(VaultError) -> R in
            guard let cipher = state.cipher else { throw .locked }
            return try body(NodeStore(db: state.db, cipher: cipher))
        }
    }

    func writing<R: ~Copyable>(durable: Bool = true, _ body: (NodeStore) throws(VaultError) -> R) throws(VaultError) -> R {
        try withStore { (store) throws(VaultError) -> R in
            try store.db.writeTransaction(durable: durable) { () throws(VaultError) -> R in try body(store) }
        }
    }

    func reading<R: ~Copyable>(_ body: (NodeStore) throws(VaultError) -> R) throws(VaultError) -> R {
        try withStore { (store) throws(VaultError) -> R in
            try store.db.readTransaction { () throws(VaultError) -> R in try body(store) }
        }
    }

    /// Whether an item of `count` bytes may be stored in this vault.
    public func checkItemSize(_ count: Int) throws(VaultError) {
        guard count <= itemSizeLimit else { throw .itemTooLarge(size: count, limit: itemSizeLimit) }
    }
}
