import CSodium
import Glibc
import Locking
import Synchronization

/// An open vault: its storage (one SQLite connection) and, while unlocked, the keys. Safe to call from
/// any thread (FUSE workers included); calls are serialised by a mutex and each change is one
/// durable SQLite transaction, so other processes using the same file see whole changes only.
public final class Vault: Sendable {
    public let path: String
    public let itemSizeLimit: Int
    private let state: OrderedMutex<State>
    /// Held through a sync of carried commits (`syncCarriedCommits`), never inside `state`'s.
    private let syncing = OrderedMutex(.vaultSyncing, ())

    private struct State {
        let storage: any VaultStorage
        /// nil while locked, or, while locked with after-first-unlock items, a cipher holding
        /// only their keys (`RecordCipher.holdsEveryKey` is false). The storage seals the
        /// generation with it while it holds every key (the reduced one lacks the header key).
        var cipher: RecordCipher? {
            didSet { storage.generationCipher = cipher.flatMap { $0.holdsEveryKey ? $0 : nil } }
        }
        /// The key slot the current passphrase opened.
        var slotID: Int64
        /// The member key file a member's open read (`open(at:memberKeyAt:passphrase:)`): an
        /// unlock takes that key's passphrase, not a vault passphrase.
        var memberKeyPath: String? = nil
        /// While locked since an unlock (not after an unmount's lock, nor before the first
        /// unlock), the search tags' key alone, for `findLockedItems`; nil otherwise.
        var searchKey: AttributeSearchKey? = nil
        /// The member key a member's open unsealed, kept while unlocked so that a rotation by
        /// another process can be followed (`followRotation`); dropped, and so wiped, by a lock.
        var member: MemberKey? = nil
        /// The name of `member`'s slot, found when it opened the vault: what its log batches are
        /// signed as.
        var memberName: [UInt8]? = nil
        /// Who signs the log batches appended now: the member, while unlocked, if their key can.
        var logSigner: LogSigner? {
            guard let member, member.canSign, let memberName, cipher?.holdsEveryKey == true else { return nil }
            return LogSigner(name: memberName, key: member)
        }
        /// The header MAC last found to verify under `cipher`: a stored one that differs means
        /// the master key was rotated (or the header tampered with).
        var verifiedHeaderMAC: [UInt8] = []
        /// The storage's token of others' commits when the header was last looked at; nil to look
        /// at the next operation.
        var checkedToken: StorageChangeToken? = nil
        /// The access log's public key of the current master key, kept through a lock (so a
        /// locked mount logs) but dropped when a rotation shuts this vault out: batches are never
        /// sealed to a key the vault no longer has.
        var logSealer: AccessLogSealer? = nil
        /// Set when a rotation by another process locked this vault; cleared by an unlock.
        var shutOut = false
        /// Log public keys a rotation replaced: a sealer a caller kept from before (the mount's
        /// log writer) is swapped for the current one, never used.
        var replacedLogKeys: Set<[UInt8]> = []

        /// Takes `cipher`, a rotation's new key: the log's sealer follows it (the one it replaces
        /// is remembered, so nothing is sealed to it any more) and the kept search key goes.
        mutating func adopt(_ cipher: RecordCipher, headerMAC: [UInt8], checked token: StorageChangeToken?) throws(VaultError) {
            self.cipher = cipher
            verifiedHeaderMAC = headerMAC
            checkedToken = token
            if let replaced = logSealer { replacedLogKeys.insert(replaced.publicKey) }
            logSealer = try AccessLogKeys(cipher: cipher).sealer
            searchKey = nil
        }

        /// A rotation this vault cannot follow: every key goes, and operations fail as locked.
        mutating func shutOutByRotation() {
            cipher = nil
            member = nil
            searchKey = nil
            logSealer = nil
            shutOut = true
        }
        /// The generation last recorded as seen (`recordGenerationSeen`).
        var recordedGeneration: Int64? = nil
        /// Whether a commit since the last durable one or sync was not synced
        /// (`.carriedByNextDurableCommit`): what `syncCarriedCommits` has to do.
        var unsynced = false
    }

    /// Where this machine records the newest generation seen of this vault (`SeenGenerations`).
    let seenLocation: String

    private init(path: String, itemSizeLimit: Int, storage: sending any VaultStorage, cipher: sending RecordCipher?, slotID: Int64,
                 headerMAC: [UInt8] = []) {
        self.path = path
        self.itemSizeLimit = itemSizeLimit
        seenLocation = SeenGenerations.location(of: path)
        storage.generationCipher = cipher.flatMap { $0.holdsEveryKey ? $0 : nil }
        let sealer = cipher.flatMap { try? AccessLogKeys(cipher: $0).sealer }
        state = OrderedMutex(.vault, State(storage: storage, cipher: cipher, slotID: slotID, verifiedHeaderMAC: headerMAC, logSealer: sealer))
    }

    deinit {
        state.withLock { Vault.recordGenerationSeen(&$0, at: seenLocation) }
    }

    /// Records the generation this vault's last write sealed as the newest seen on this machine,
    /// while every key is here: at a lock, an unmount and when the vault is released (not at
    /// every write, which would cost a sync each). A failure to record is not the operation's.
    private static func recordGenerationSeen(_ state: inout State, at location: String) {
        // The offline replica first: it must hold the generation recorded as seen, or an open
        // from it would be refused as older; and what this process read or changed is there to
        // read offline next time (a command copies as it closes the vault).
        _ = try? (state.storage as? ReplicatedStorage)?.refreshReplica()
        guard let cipher = state.cipher, cipher.holdsEveryKey, let generation = state.storage.lastSealedGeneration,
              generation != state.recordedGeneration, let header = try? state.storage.header() else { return }
        if (try? SeenGenerations.record(location: location, generation: generation, headerMAC: header.mac, cipher: cipher)) != nil {
            state.recordedGeneration = generation
        }
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
        let vaultID = randomBytes(VaultFormat.vaultIDBytes)
        let master = try KeyDerivation.randomMasterKey()
        let cipher = try RecordCipher(vaultID: vaultID, master: master)
        let slot = try sealKeySlot(master: master, passphrase: passphrase, parameters: kdf, slotID: 1)
        return try create(at: path, vaultID: vaultID, cipher: cipher, itemSizeLimit: itemSizeLimit, slotID: 1) { (storage) throws(VaultError) in
            try storage.upsertKeySlot(slot)
        }
    }

    /// Creates a team vault whose only way in is `member`'s slot, named `name`: no passphrase
    /// slot, so no shared secret exists that a removed member could keep.
    public static func create(at path: String, member: MemberKey, name: String,
                              itemSizeLimit: Int = defaultItemSizeLimit) throws(VaultError) -> Vault {
        let nameBytes = try checkedMemberName(name)
        guard (1...maximumItemSizeLimit).contains(itemSizeLimit) else {
            throw .invalidArgument("the item size limit must be between 1 and \(maximumItemSizeLimit) bytes")
        }
        let vaultID = randomBytes(VaultFormat.vaultIDBytes)
        let master = try KeyDerivation.randomMasterKey()
        let cipher = try RecordCipher(vaultID: vaultID, master: master)
        let slot = try MemberSlot.seal(master: master, vaultID: vaultID, name: nameBytes, publicKey: member.publicKey)
        let vault = try create(at: path, vaultID: vaultID, cipher: cipher, itemSizeLimit: itemSizeLimit,
                               slotID: memberSlotID) { (storage) throws(VaultError) in
            try storage.insertMemberSlot(slot)
        }
        vault.state.withLock {
            $0.member = member
            $0.memberName = nameBytes
        }
        return vault
    }

    /// The records every new vault starts with, and `slots` its ways in, in one transaction.
    static func create(at path: String, vaultID: [UInt8], cipher: RecordCipher, itemSizeLimit: Int, slotID: Int64,
                               slots: (any VaultStorage) throws(VaultError) -> Void) throws(VaultError) -> Vault {
        let headerMAC = cipher.headerMAC(itemSizeLimit: itemSizeLimit, oldestFormat: VaultFormat.version)
        let storage = try VaultLocation.createStorage(at: path) { (storage) throws(VaultError) in
            try storage.setFormatVersion(VaultFormat.version)
            try storage.insertHeader(VaultHeader(vaultID: vaultID, itemSizeLimit: itemSizeLimit, mac: headerMAC),
                                     firstNodeID: NodeID(NodeID.root.rawValue + 1))
            try storage.setRulesMAC(cipher.rulesMAC([]))
            try slots(storage)
            try storage.setMembersMAC(cipher.membersMAC(try storage.memberSlots()))
            let now = Timestamp.now()
            let rootAttributes = NodeAttributes(kind: .dictionary, mode: 0o700, size: 0, at: now, contentGeneration: 0)
            let root = RecordPlace.new(.root)
            // The root has no parent and no name: a tag no real name can have, and an empty name.
            try storage.insertNode(NodeRow(id: .root, parent: NodeID(0), kind: NodeKind.dictionary.rawValue, incarnation: root.incarnation,
                                           nameTag: [UInt8](repeating: 0, count: 32), sealedName: [],
                                           sealedAttributes: cipher.sealAttributes(rootAttributes, root)),
                                   sealedContent: nil)
            try storage.raiseGeneration(sealedBy: cipher)
        }
        let vault = Vault(path: path, itemSizeLimit: itemSizeLimit, storage: storage, cipher: cipher, slotID: slotID, headerMAC: headerMAC)
        // A vault made again at the same place (after its file was removed) starts a new record.
        // Not recorded (a state directory that cannot be written): the next open records it,
        // or fails, with nothing to compare until then.
        _ = try? SeenGenerations.check(location: vault.seenLocation, generation: storage.lastSealedGeneration ?? 0,
                                       headerMAC: headerMAC, cipher: cipher, accepting: true)
        return vault
    }

    /// Opens an existing vault with a passphrase.
    /// With `acceptingRollback`, a vault older than the newest generation this machine saw of it
    /// opens (else `.rolledBack`), and its generation becomes the newest seen.
    public static func open(at path: String, passphrase: borrowing SecureBuffer, acceptingRollback: Bool = false) throws(VaultError) -> Vault {
        let storage = try VaultLocation.openStorage(at: path)
        // In one read: another process may upgrade the vault in between, which would make a
        // version read before its header look set back.
        let (version, (vaultID, itemSizeLimit, storedMAC)) = try storage.read { () throws(VaultError) in
            (try checkedVersion(of: storage, at: path), try readHeader(storage))
        }
        var unlockedMaster: SecureBuffer? = nil
        var unlockedSlot: Int64 = 0
        let slots = try storage.keySlots()
        if slots.isEmpty {
            // A team vault made by a member has member slots only; a vault with neither lost them.
            let members = version >= VaultFormat.oldestWithMembers ? try storage.memberSlots() : []
            throw members.isEmpty ? .integrityFailure("key slots (none left)") : .memberKeyRequired
        }
        for slot in slots {
            let kek = try KeyDerivation.keyEncryptionKey(passphrase: passphrase, salt: slot.salt, parameters: slot.parameters)
            var master = try SecureBuffer(capacity: KeyDerivation.masterKeyBytes)
            let ad = RecordCipher.slotAssociatedData(slotID: slot.id, parameters: slot.parameters)
            if AEAD.open(slot.wrappedMasterKey, key: kek, associatedData: ad, into: &master), master.count == KeyDerivation.masterKeyBytes {
                unlockedMaster = consume master
                unlockedSlot = slot.id
                break
            }
        }
        guard let master = unlockedMaster.take() else { throw .wrongPassphrase }
        return try opened(storage, at: path, version: version, vaultID: vaultID, itemSizeLimit: itemSizeLimit, storedMAC: storedMAC,
                          master: master, slotID: unlockedSlot, acceptingRollback: acceptingRollback)
    }

    /// Opens an existing vault with a member's key (its secret half already unsealed with the
    /// member's passphrase), through the member's key slot (format 6 on).
    public static func open(at path: String, member: MemberKey, acceptingRollback: Bool = false) throws(VaultError) -> Vault {
        let storage = try VaultLocation.openStorage(at: path)
        let (version, (vaultID, itemSizeLimit, storedMAC)) = try storage.read { () throws(VaultError) in
            (try checkedVersion(of: storage, at: path), try readHeader(storage))
        }
        // Older vaults have no member slots: a member was never added to them.
        guard version >= VaultFormat.oldestWithMembers else { throw .notAMember(member.publicKey.base64) }
        var unlockedMaster: SecureBuffer? = nil
        var name: [UInt8]? = nil
        for slot in try storage.memberSlots() {
            if let master = try MemberSlot.open(slot, vaultID: vaultID, member: member, format: version) {
                unlockedMaster = consume master
                name = slot.name
                break
            }
        }
        guard let master = unlockedMaster.take() else { throw .notAMember(member.publicKey.base64) }
        let vault = try opened(storage, at: path, version: version, vaultID: vaultID, itemSizeLimit: itemSizeLimit, storedMAC: storedMAC,
                               master: master, slotID: Vault.memberSlotID, acceptingRollback: acceptingRollback)
        vault.state.withLock {
            $0.member = member
            $0.memberName = name
        }
        return vault
    }

    /// Opens the vault as the member whose key is in `keyPath`, `passphrase` unsealing that
    /// key; later unlocks of this vault take the same key's passphrase.
    public static func open(at path: String, memberKeyAt keyPath: String, passphrase: borrowing SecureBuffer,
                            acceptingRollback: Bool = false) throws(VaultError) -> Vault {
        let member = try MemberKey.open(at: keyPath, passphrase: passphrase)
        let vault = try open(at: path, member: member, acceptingRollback: acceptingRollback)
        vault.state.withLock { $0.memberKeyPath = keyPath }
        return vault
    }

    /// The slot id a vault opened by a member holds: no passphrase slot (`changePassphrase` refuses).
    static let memberSlotID: Int64 = 0
    /// The slot id a vault opened with its TPM PIN holds: not a passphrase slot (`changePassphrase` refuses).
    static let pinSlotOpenedID: Int64 = -1

    /// Whether a member key opened this vault (its unlocks take that key's passphrase).
    var opensWithMemberKey: Bool { state.withLock { $0.memberKeyPath != nil } }

    /// The rest of opening, once a slot gave the master key: the header is checked with it,
    /// then the vault is upgraded if it is older.
    static func opened(_ storage: sending any VaultStorage, at path: String, version: Int, vaultID: [UInt8], itemSizeLimit: Int,
                               storedMAC: [UInt8], master: consuming SecureBuffer, slotID: Int64,
                               acceptingRollback: Bool) throws(VaultError) -> Vault {
        let cipher = try RecordCipher(vaultID: vaultID, master: master)
        if let sealed = VaultFormat.sealedVersions.first(where: {
            cipher.headerMACMatches(storedMAC, itemSizeLimit: itemSizeLimit, oldestFormat: $0)
        }) {
            // Sealed as format 4 or later: another version number was written by someone else
            // (an upgrade writes the number and the MAC in one transaction).
            guard version >= sealed else {
                throw .integrityFailure("vault header (the format version was set back to \(version))")
            }
            guard version == sealed else {
                throw .integrityFailure("vault header (the format version was set to \(version), sealed as \(sealed))")
            }
        } else if !cipher.headerMACMatches(storedMAC, itemSizeLimit: itemSizeLimit, oldestFormat: nil) || version >= VaultFormat.oldestSealedVersion {
            throw .integrityFailure("vault header")
        }
        // Upgrading needs the keys (records are sealed again), so it waits for the first open
        // with a passphrase; opening without one reads older versions as they are.
        storage.generationCipher = cipher
        if version < VaultFormat.version {
            try FormatUpgrade.upgrade(NodeStore(storage: storage, cipher: cipher), from: version, path: path)
        }
        // An upgrade seals the header again. The state is checked (rules or member rows put back
        // from an older copy fail) and its generation compared with the newest seen here.
        let store = NodeStore(storage: storage, cipher: cipher)
        func readState() throws(VaultError) -> ([UInt8], Int64) {
            try storage.read { () throws(VaultError) -> ([UInt8], Int64) in
                let state = try store.checkedState()
                return (state.headerMAC, state.generation)
            }
        }
        var (headerMAC, generation) = try readState()
        let vault = Vault(path: path, itemSizeLimit: itemSizeLimit, storage: storage, cipher: cipher, slotID: slotID, headerMAC: headerMAC)
        // Another process may commit and record a newer generation between this read and the
        // check; it records only after its commit, so a fresh read then sees at least as new a
        // one. A vault that is older still, read again, is a rollback.
        var attempts = 0
        while true {
            do throws(VaultError) {
                try SeenGenerations.check(location: vault.seenLocation, generation: generation, headerMAC: headerMAC, cipher: cipher,
                                          accepting: acceptingRollback)
                break
            } catch .rolledBack(let location, let found, let newest) {
                attempts += 1
                guard attempts < 3 else { throw .rolledBack(path: location, found: found, newest: newest) }
                (headerMAC, generation) = try readState()
            }
        }
        vault.state.withLock { $0.recordedGeneration = generation }
        // The replica carries the newest generation this machine copied: a server older than
        // it was restored from an older dump, even where the record above was lost.
        try vault.withStorage { (storage) throws(VaultError) in
            try (storage as? ReplicatedStorage)?.checkAtOpen(accepting: acceptingRollback)
        }
        return vault
    }

    /// Opens a vault without its passphrase, locked with every key absent, to be unlocked
    /// later (a service started with no terminal to ask on). Until then what needs a key fails
    /// with `.locked`; `changeStamp()` and `itemCount()` work. The item size limit read here is
    /// not yet authenticated: `unlock` checks it.
    public static func openLocked(at path: String) throws(VaultError) -> Vault {
        let (storage, _) = try openStorage(at: path)
        let (_, itemSizeLimit, _) = try readHeader(storage)
        return Vault(path: path, itemSizeLimit: itemSizeLimit, storage: storage, cipher: nil, slotID: 0)
    }

    /// Checks that `path` holds a vault of a known format, without unlocking it.
    public static func checkOpenable(at path: String) throws(VaultError) {
        _ = try openStorage(at: path)
    }

    /// The vault's storage and format version, once that is one this code reads or upgrades.
    private static func openStorage(at path: String) throws(VaultError) -> (any VaultStorage, Int) {
        let storage = try VaultLocation.openStorage(at: path)
        return (storage, try checkedVersion(of: storage, at: path))
    }

    static func checkedVersion(of storage: any VaultStorage, at path: String) throws(VaultError) -> Int {
        let version = try storage.formatVersion()
        guard version <= VaultFormat.version else {
            throw .unknownFormatVersion(found: version, supported: VaultFormat.version)
        }
        guard version >= VaultFormat.oldestUpgradable else { throw .notAVault(path: path, reason: "format version \(version)") }
        return version
    }

    static func readHeader(_ storage: any VaultStorage) throws(VaultError) -> ([UInt8], Int, [UInt8]) {
        guard let header = try storage.header(), header.vaultID.count == VaultFormat.vaultIDBytes,
              header.itemSizeLimit > 0, header.itemSizeLimit <= maximumItemSizeLimit else {
            throw .integrityFailure("vault header")
        }
        return (header.vaultID, header.itemSizeLimit, header.mac)
    }

    static func sealKeySlot(master: borrowing SecureBuffer, passphrase: borrowing SecureBuffer, parameters: KDFParameters,
                                    slotID: Int64) throws(VaultError) -> KeySlotRow {
        let salt = randomBytes(KeyDerivation.saltBytes)
        let kek = try KeyDerivation.keyEncryptionKey(passphrase: passphrase, salt: salt, parameters: parameters)
        let ad = RecordCipher.slotAssociatedData(slotID: slotID, parameters: parameters)
        let wrapped = master.withUnsafeBytes { AEAD.seal($0, key: kek, associatedData: ad) }
        return KeySlotRow(id: slotID, parameters: parameters, salt: salt, wrappedMasterKey: wrapped)
    }

    // MARK: passphrase

    /// Rewraps the master key under a new passphrase in the slot the current one opened;
    /// nothing else is re-encrypted. One transaction: a crash leaves the old or the new slot.
    public func changePassphrase(to newPassphrase: borrowing SecureBuffer, kdf: KDFParameters? = nil) throws(VaultError) {
        guard newPassphrase.count > 0 else { throw .invalidArgument("the new passphrase is empty") }
        try state.withLock { (state) throws(VaultError) in
            guard let cipher = state.cipher, cipher.holdsEveryKey else { throw .locked }
            let slotID = state.slotID
            guard slotID != Vault.memberSlotID else {
                throw .invalidArgument("the vault was opened with a member key, which has no passphrase slot to change")
            }
            guard slotID != Vault.pinSlotOpenedID else {
                throw .invalidArgument("the vault was opened with its TPM PIN: open it with the passphrase to change the passphrase")
            }
            let storage = state.storage
            var parameters = kdf
            if parameters == nil, let current = try storage.keySlots().first(where: { $0.id == slotID }) {
                parameters = KDFParameters(opsLimit: current.parameters.opsLimit, memLimit: current.parameters.memLimit)
            }
            let chosen = parameters ?? KDFPreset.moderate.parameters
            let slot = try cipher.withMasterKey { (master) throws(VaultError) in
                try Vault.sealKeySlot(master: master, passphrase: newPassphrase, parameters: chosen, slotID: slotID)
            }
            try storage.write(.durable) { () throws(VaultError) in try storage.upsertKeySlot(slot) }
        }
    }

    // MARK: lock state

    public var isLocked: Bool { state.withLock { !($0.cipher?.holdsEveryKey ?? false) } }

    /// Whether a lock kept keys for after-first-unlock items (false when unlocked).
    public var keepsAfterFirstUnlockKeys: Bool {
        state.withLock { $0.cipher.map { !$0.holdsEveryKey } ?? false }
    }

    /// Locks: operations fail with `.locked` until `unlock`, except, with
    /// `keepingAfterFirstUnlock` and while the vault holds an after-first-unlock item, reaching
    /// such items by path and reading and storing them. Then a reduced cipher keeps their keys
    /// (`VaultKeys.afterFirstUnlockOnly`) and every other key, the master key first, is wiped;
    /// without such an item every key goes. `keepingAfterFirstUnlock: false` is the unmount.
    /// Either way but the unmount, the search tags' key is kept on its own (`findLockedItems`).
    public func lock(keepingAfterFirstUnlock: Bool = true) {
        state.withLock { state in
            Vault.recordGenerationSeen(&state, at: seenLocation)
            // The member's secret key goes with every lock: it opens the master key.
            state.member = nil
            guard keepingAfterFirstUnlock else {
                state.cipher = nil
                state.searchKey = nil
                return
            }
            // Already locked: keep what the first lock kept.
            guard let cipher = state.cipher, cipher.holdsEveryKey else { return }
            // A Secret Service client searches before it asks to unlock, and without an answer
            // it never asks, so the search tags' key outlives the lock. The price: while locked,
            // whoever can read this process's memory and also has the vault file can test
            // guesses of attribute values against the stored tags (not read them, nor any
            // name, value or content). gnome-keyring leaves a locked keyring's attributes in its
            // file as unkeyed hashes, open to the same guessing with the file alone.
            state.searchKey = cipher.attributeSearchKey
            // Decided while every key is still here.
            let keep = (try? NodeStore(storage: state.storage, cipher: cipher).holdsAfterFirstUnlockItem()) ?? false
            state.cipher = keep ? cipher.afterFirstUnlockOnly : nil
        }
    }

    /// Re-derives the keys from the passphrase (of the member key, when a member opened the
    /// vault); a wrong one leaves the vault locked.
    public func unlock(passphrase: borrowing SecureBuffer) throws(VaultError) {
        let memberKeyPath = state.withLock { $0.memberKeyPath }
        let reopened = if let memberKeyPath {
            try Vault.open(at: path, memberKeyAt: memberKeyPath, passphrase: passphrase)
        } else {
            try Vault.open(at: path, passphrase: passphrase)
        }
        try adoptKeys(of: reopened)
    }

    /// Takes the keys of `reopened`, this vault opened again (by `unlock`): an unlock.
    func adoptKeys(of reopened: Vault) throws(VaultError) {
        // What `openLocked` read before any key could check it.
        guard reopened.itemSizeLimit == itemSizeLimit else { throw .integrityFailure("vault header") }
        let opened = reopened.state.withLock { (s) in (s.cipher, s.slotID, s.member, s.verifiedHeaderMAC, s.logSealer, s.memberName) }
        state.withLock {
            $0.cipher = opened.0
            $0.slotID = opened.1
            $0.member = opened.2
            $0.memberName = opened.5
            $0.verifiedHeaderMAC = opened.3
            $0.logSealer = opened.4
            $0.checkedToken = nil
            $0.shutOut = false
            // The new cipher has its own; none is held twice.
            $0.searchKey = nil
        }
    }

    /// How many items the vault holds; readable while locked (the file shows it to anyone).
    public func itemCount() throws(VaultError) -> Int {
        try state.withLock { (state) throws(VaultError) -> Int in
            try state.storage.itemCount()
        }
    }

    // MARK: running operations

    /// Runs `body` with the storage, locked or not, inside the vault's mutex: for what needs no
    /// key (the access log is appended with its public key alone).
    func withStorage<R: ~Copyable>(_ body: (any VaultStorage) throws(VaultError) -> R) throws(VaultError) -> R {
        try state.withLock { (state) throws(VaultError) -> R in try body(state.storage) }
    }

    /// The transaction an operation's body runs in (`withStore`), its rotation check with it.
    enum StoreTransaction {
        /// One or two statements: `VaultStorage.statements`.
        case statements
        /// `VaultStorage.read`: one snapshot on every storage.
        case read
        case write(CommitDurability)
    }

    /// Runs `body` in `transaction` on the state's storage.
    private static func run<R: ~Copyable>(_ transaction: StoreTransaction, _ state: inout State,
                                          _ body: (inout State) throws(VaultError) -> R) throws(VaultError) -> R {
        let storage = state.storage
        switch transaction {
        case .statements: return try storage.statements { () throws(VaultError) -> R in try body(&state) }
        case .read: return try storage.read { () throws(VaultError) -> R in try body(&state) }
        case .write(let durability): return try storage.write(durability) { () throws(VaultError) -> R in try body(&state) }
        }
    }

    /// Runs `body` with the node store while unlocked, inside the vault's mutex and in
    /// `transaction`, which the look for another process's rotation shares (on SQLite, one
    /// transaction's locks instead of two). While locked only operations marked `whileLocked`
    /// run (with the reduced cipher, which lets them reach dictionaries and after-first-unlock
    /// items only); every other one fails with `.locked`.
    /// `markingUnsynced`, once `body` returned (its commit done), sets (true) or clears (false)
    /// `State.unsynced` in the same hold of the mutex, so no sync can come in between.
    func withStore<R: ~Copyable>(naming: NodeStore.MessageNaming = .nodes, whileLocked: Bool = false,
                                 markingUnsynced: Bool? = nil, in transaction: StoreTransaction = .statements,
                                 _ body: (NodeStore) throws(VaultError) -> R) throws(VaultError) -> R {
        func inTransaction(_ state: inout State, _ rekeyed: RecordCipher?) throws(VaultError) -> R {
            try Vault.run(transaction, &state) { (state) throws(VaultError) -> R in
                let cipher: RecordCipher
                if let rekeyed {
                    cipher = rekeyed
                } else {
                    try Vault.followRotation(&state, force: false)
                    guard let current = state.cipher, current.holdsEveryKey || whileLocked else { throw .locked }
                    cipher = current
                }
                return try body(NodeStore(storage: state.storage, cipher: cipher, naming: naming, signer: state.logSigner))
            }
        }
        return try state.withLock { (state) throws(VaultError) -> R in
            // Made by `body` on this thread and handed back to its caller: region checking
            // cannot see that through the closures `body` is called from, and would refuse it.
            nonisolated(unsafe) let result: R
            do throws(VaultError) {
                result = try inTransaction(&state, nil)
            } catch .integrityFailure(let what) {
                // A rotation may have committed between the look and the body's snapshot (on
                // PostgreSQL, where they are apart); then the body failed whole (a write rolled
                // back) and runs again with the new keys.
                let storage = state.storage
                let found = try storage.read { () throws(VaultError) in try Vault.followRotation(&state, force: true) }
                guard found == .rekeyed, let rekeyed = state.cipher else {
                    if state.cipher == nil { throw .locked }
                    throw .integrityFailure(what)
                }
                result = try inTransaction(&state, rekeyed)
            }
            if let markingUnsynced { state.unsynced = markingUnsynced }
            return result
        }
    }

    /// What `followRotation` found.
    enum RotationCheck {
        case unchanged, rekeyed, shutOut
    }

    /// Under the mutex, before an operation: when the storage changed since the last look (or
    /// with `force`), compares the stored header MAC with the one last verified (no key
    /// needed, so a lock's reduced cipher can look too). Another MAC means another process
    /// rotated the master key, or the header was tampered with. A vault opened by a member,
    /// while unlocked, opens its member slot again and takes the new key if the header verifies
    /// under it; any other vault (opened with a passphrase, its member removed, or locked) is
    /// shut out: it locks, so operations fail with `.locked`, never as tampering, and its log
    /// sealer goes (nothing is sealed to a key the others no longer use).
    @discardableResult
    private static func followRotation(_ state: inout State, force: Bool) throws(VaultError) -> RotationCheck {
        // Locked with no key at all: nothing to follow with or to go stale, but the search key a
        // lock kept, which a rotation makes useless (its tags are gone).
        guard state.cipher != nil || state.searchKey != nil, !state.verifiedHeaderMAC.isEmpty else { return .unchanged }
        let storage = state.storage
        // Others' commits only: this vault's own writes change the header only through its
        // rotations and upgrades, which take the new MAC themselves.
        let token = try storage.othersChangeToken()
        guard force || token != state.checkedToken else { return .unchanged }
        let (header, version) = try storage.read { () throws(VaultError) in (try storage.header(), try storage.formatVersion()) }
        guard let header else { return .unchanged }  // the operation reports it
        guard header.mac != state.verifiedHeaderMAC else {
            state.checkedToken = token
            return .unchanged
        }
        let sealedAs: Int? = version >= VaultFormat.oldestSealedVersion ? version : nil
        if let cipher = state.cipher, cipher.holdsEveryKey, cipher.headerMACMatches(header.mac, itemSizeLimit: header.itemSizeLimit, oldestFormat: sealedAs) {
            state.verifiedHeaderMAC = header.mac
            state.checkedToken = token
            return .unchanged
        }
        if let cipher = state.cipher, cipher.holdsEveryKey, let member = state.member, header.vaultID == cipher.vaultID,
           let rekeyed = try? rekeyedCipher(storage, vaultID: header.vaultID, member: member, format: version),
           rekeyed.headerMACMatches(header.mac, itemSizeLimit: header.itemSizeLimit, oldestFormat: sealedAs) {
            try state.adopt(rekeyed, headerMAC: header.mac, checked: token)
            return .rekeyed
        }
        state.shutOutByRotation()
        return .shutOut
    }

    /// The cipher of the master key in `member`'s slot as stored now; nil when it has none.
    private static func rekeyedCipher(_ storage: any VaultStorage, vaultID: [UInt8], member: MemberKey,
                                      format: Int) throws(VaultError) -> RecordCipher? {
        for slot in try storage.memberSlots() {
            if let master = try MemberSlot.open(slot, vaultID: vaultID, member: member, format: format) {
                return try RecordCipher(vaultID: vaultID, master: master)
            }
        }
        return nil
    }

    /// Whether a rotation by another process locked this vault (it could not follow).
    public var wasShutOutByRotation: Bool { state.withLock { $0.shutOut } }

    /// Looks for a rotation by another process now, as every operation does first (cheap when
    /// nothing was committed since the last look), following it or locking; whether this vault
    /// is shut out. For a mount, whose lock state must follow without waiting for a request.
    @discardableResult
    public func followRotation() throws(VaultError) -> Bool {
        try state.withLock { (state) throws(VaultError) -> Bool in
            try Vault.followRotation(&state, force: false)
            return state.shutOut
        }
    }

    /// Runs `rotate` under the mutex with the unlocked store and the slot this vault was opened
    /// by (`memberSlotID` for a member); once it returns (its `write`
    /// committed), the cipher it gives back is this vault's: its header MAC, log key and
    /// search key follow.
    func rotatingKeys<R>(_ rotate: (NodeStore, _ slotID: Int64) throws(VaultError) -> (R, RecordCipher))
        throws(VaultError) -> R {
        try state.withLock { (state) throws(VaultError) -> R in
            try Vault.followRotation(&state, force: false)
            guard let cipher = state.cipher, cipher.holdsEveryKey else { throw .locked }
            let storage = state.storage
            let result: R
            let rotated: RecordCipher
            // `rotate` hands its write the new cipher to seal the generation with; a rotation
            // that failed leaves the current one.
            defer { storage.generationCipher = state.cipher.flatMap { $0.holdsEveryKey ? $0 : nil } }
            do throws(VaultError) {
                (result, rotated) = try rotate(NodeStore(storage: storage, cipher: cipher, naming: .paths, signer: state.logSigner), state.slotID)
            } catch .integrityFailure(let what) {
                // Another rotation may have committed since the look above (as in `withStore`).
                guard try Vault.followRotation(&state, force: true) == .rekeyed, let rekeyed = state.cipher else {
                    if state.cipher == nil { throw .locked }
                    throw .integrityFailure(what)
                }
                (result, rotated) = try rotate(NodeStore(storage: storage, cipher: rekeyed, naming: .paths, signer: state.logSigner), state.slotID)
            }
            try state.adopt(rotated, headerMAC: try storage.header()?.mac ?? [], checked: nil)
            if let member = state.member, try !storage.memberSlots().contains(where: { $0.publicKey == member.publicKey.bytes }) {
                // A member who removed themselves keeps nothing of the new key.
                state.shutOutByRotation()
            }
            return result
        }
    }

    /// This machine's record of the newest access log batch it saw of this vault. Its `recorded`
    /// is read before the reading transaction that compares the log with it starts: a batch
    /// another process commits meanwhile is recorded only after its commit, so every batch the
    /// record names is in that transaction's snapshot.
    func seenLogHeads() -> SeenLogHeads? {
        guard let vaultID = state.withLock({ $0.cipher?.vaultID ?? $0.logSealer?.vaultID }) else { return nil }
        return SeenLogHeads(location: seenLocation, vaultID: vaultID)
    }

    /// Runs `append` in a durable write unseen by the change token, with `given` (or, when it
    /// is none or one a rotation replaced, the log sealer of the current master key): inside the write the header
    /// MAC is compared with the one verified, so a batch is never sealed to a key that a
    /// rotation committed just before replaced. Then the rotation is followed and `append`
    /// runs once more; a vault shut out by a rotation logs nothing (`.locked`).
    /// The batch it appended is recorded as the newest this machine saw (`SeenLogHeads`).
    func appendingToLog(given: AccessLogSealer?,
                        _ append: (any VaultStorage, AccessLogSealer, LogSigner?, LogHead?) throws(VaultError) -> LogHead?) throws(VaultError) {
        try state.withLock { (state) throws(VaultError) in
            try Vault.followRotation(&state, force: false)
            for attempt in 0..<2 {
                let current = state.logSealer
                let chosen = given.flatMap { state.replacedLogKeys.contains($0.publicKey) ? nil : $0 } ?? current
                guard !state.shutOut, let sealer = chosen else { throw .locked }
                let storage = state.storage
                let expected = state.verifiedHeaderMAC
                let heads = SeenLogHeads(location: seenLocation, vaultID: sealer.vaultID)
                let seen = heads?.recorded
                let appended = try storage.write(.durable, seenByChangeToken: false) { () throws(VaultError) -> LogHead?? in
                    // Before a key was here there is no MAC to compare: `given` was derived then.
                    let stored = try storage.header()?.mac
                    guard expected.isEmpty || stored == expected else { return nil }
                    return .some(try append(storage, sealer, state.logSigner, seen))
                }
                if let appended {
                    if let head = appended { heads?.record(head) }
                    return
                }
                if attempt == 0 { try Vault.followRotation(&state, force: true) }
            }
            throw .locked
        }
    }

    func writing<R: ~Copyable>(durable: Bool = true, naming: NodeStore.MessageNaming = .nodes, whileLocked: Bool = false,
                               _ body: (NodeStore) throws(VaultError) -> R) throws(VaultError) -> R {
        // A durable commit's sync took every earlier commit along.
        try withStore(naming: naming, whileLocked: whileLocked, markingUnsynced: !durable,
                      in: .write(durable ? .durable : .carriedByNextDurableCommit), body)
    }

    /// Makes every change committed so far durable (those made with `durable: false` included),
    /// without writing a record; nothing to do when none is pending. Works while locked. The
    /// mount's fsync of a directory and its flusher (`CommitFlusher`) call it.
    /// Where the storage can (SQLite), the sync runs outside the vault's mutex, so the mount
    /// goes on committing meanwhile and the closes that came during one sync share the next
    /// (`GroupCommit`). One sync at a time (`syncing`): a caller that finds nothing pending
    /// because another's sync took it waits for that sync to end before it returns.
    public func syncCarriedCommits() throws(VaultError) {
        try syncing.withLock { (_) throws(VaultError) in
            let alongside = try state.withLock { (state) throws(VaultError) -> (any VaultStorage)? in
                guard state.unsynced else { return nil }
                if state.storage.syncsAlongsideCommits {
                    state.unsynced = false
                    return state.storage
                }
                try state.storage.syncCarriedCommits()
                state.unsynced = false
                return nil
            }
            guard let alongside else { return }
            do throws(VaultError) {
                try alongside.syncAlongsideCommits()
            } catch {
                state.withLock { $0.unsynced = true }
                throw error
            }
        }
    }

    /// Gives space freed by removals back to the filesystem, when there is enough of it, and
    /// with `trimmingLog` the log of recent commits (`VaultStorage.reclaimFreeSpace`); works
    /// while locked, no key is needed.
    public func reclaimFreeSpace(trimmingLog: Bool) throws(VaultError) {
        var continuing = false
        // The mutex is taken for one step at a time: requests are served between steps.
        while try state.withLock({ (state) throws(VaultError) -> Bool in
            try state.storage.reclaimFreeSpace(trimmingLog: trimmingLog, continuing: continuing)
        }) {
            continuing = true
        }
    }

    /// Whether the storage's sync can run beside its commits (`VaultStorage.syncsAlongsideCommits`).
    public var syncsAlongsideCommits: Bool { state.withLock { $0.storage.syncsAlongsideCommits } }

    /// Whether a change committed with `durable: false` is not yet known to be durable.
    public var hasUnsyncedCommits: Bool { state.withLock { $0.unsynced } }

    func reading<R: ~Copyable>(naming: NodeStore.MessageNaming = .nodes, whileLocked: Bool = false,
                               _ body: (NodeStore) throws(VaultError) -> R) throws(VaultError) -> R {
        try withStore(naming: naming, whileLocked: whileLocked, in: .read, body)
    }

    /// Runs `unlocked` with the node store while every key is here; else `locked` with the
    /// storage and the search tags' key a lock kept (none kept: `.locked`). Either on one
    /// snapshot, in one hold of the mutex: a lock or unlock cannot come between the check and
    /// the search.
    func searching(unlocked: (NodeStore) throws(VaultError) -> [NodeID],
                   locked: (any VaultStorage, AttributeSearchKey) throws(VaultError) -> [NodeID]) throws(VaultError) -> [NodeID] {
        try state.withLock { (state) throws(VaultError) -> [NodeID] in
            try Vault.followRotation(&state, force: false)
            let storage = state.storage
            if let cipher = state.cipher, cipher.holdsEveryKey {
                let store = NodeStore(storage: storage, cipher: cipher)
                return try storage.read { () throws(VaultError) -> [NodeID] in try unlocked(store) }
            }
            guard let key = state.searchKey else { throw .locked }
            return try storage.read { () throws(VaultError) -> [NodeID] in try locked(storage, key) }
        }
    }

    /// Whether an item of `count` bytes may be stored in this vault.
    public func checkItemSize(_ count: Int) throws(VaultError) {
        guard count <= itemSizeLimit else { throw .itemTooLarge(size: count, limit: itemSizeLimit) }
    }
}
