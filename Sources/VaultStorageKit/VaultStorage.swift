/// Where a vault's records live. VaultCore reaches them only through this protocol; every value
/// that crosses it is ciphertext, a lookup tag, an id or a counter, never plaintext, and every
/// record is authenticated above it (NodeStore), so an implementation is trusted for nothing but
/// durability. SQLite (`SQLiteStorage`) and PostgreSQL (`PostgresStorage`) implement it.
///
/// How PostgreSQL (libpq, synchronous) carries it: one connection per
/// open vault, every method at most one prepared statement (no SQL built from values), sent
/// with others in one round trip where nothing waits between them, or none when the rows the
/// connection knows answer it (`PostgresKnownRows`);
/// several vaults share one database, so each table has a `vault` column that every statement
/// scopes by, and the `vault` table holds one row per vault (its header, next node id and format
/// version) where SQLite keeps them in its singleton row and `user_version`. `write` is
/// BEGIN, a row lock on the vault's row (serialising its writers), ... COMMIT with `SET LOCAL synchronous_commit = off` for `.carriedByNextDurableCommit`
/// (PostgreSQL's WAL flush of a later commit takes an unsynced one along, as SQLite's does);
/// `read` is BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY. `allocateNodeID` is the same
/// UPDATE ... RETURNING on the vault's row. The change token counts this connection's commits
/// and the NOTIFYs received on the vault's channel (every write transaction sends one, naming
/// the node ids it touched: `PostgresChangeNotice`, which `VaultChangeListener` hears), and the
/// vault row's `change_count` read on each new connection (NOTIFYs sent while there was none
/// are lost). Errors map to VaultError in one place, as `SQLiteConnection.error` does for
/// SQLite; a server lost, unreachable or silent past the timeout is `.storageUnreachable`, and
/// the next call outside a transaction connects again (`PostgresConnection`).
///
/// Methods are grouped by record family, with their rows beside `NodeRow`, `AttributeRow`,
/// `RuleRow` and `AccessLogRow`.
/// Outside `write`/`read`, each call is its own snapshot. Not thread-safe: a vault serialises its
/// calls with its own mutex, which is what makes the `Sendable` claim of implementations true.
package protocol VaultStorage: AnyObject, Sendable {
    // MARK: transactions

    /// Runs `body` as one transaction that takes the write lock up front (waiting out other
    /// writers); any error rolls everything back. With `seenByChangeToken` false, this
    /// connection's `changeToken` does not move for it: for records about the vault rather
    /// than of it (access log batches), which would otherwise tell every holder of something
    /// read earlier (an open listing across a lock, the mount's rules) that it may be stale.
    func write<R: ~Copyable>(_ durability: CommitDurability, seenByChangeToken: Bool,
                             _ body: () throws(VaultError) -> R) throws(VaultError) -> R

    /// Makes every commit so far durable, `.carriedByNextDurableCommit` ones included, without
    /// changing a record: what a `.durable` commit would take along, at less cost.
    func syncCarriedCommits() throws(VaultError)

    /// Whether `syncAlongsideCommits` can be used now (asked with the storage otherwise idle).
    var syncsAlongsideCommits: Bool { get }

    /// Whether mounts on other machines change the records at any time (PostgreSQL): a mount
    /// then reads an opened item's blocks all at once, so that a removal elsewhere leaves its
    /// descriptors what they opened, as a local unlink does.
    var isShared: Bool { get }

    /// What `syncCarriedCommits` does, without this connection, so that other commits may go
    /// on meanwhile (called by one thread at a time, the storage's other calls going on
    /// beside it): every commit that returned before the call is durable when it returns.
    /// Only where `syncsAlongsideCommits`.
    func syncAlongsideCommits() throws(VaultError)

    /// Gives space that removals freed back to the filesystem once it is a good part of the
    /// storage (SQLite; a PostgreSQL server vacuums on its own); `trimmingLog`, with nothing
    /// else to do, the log of recent commits too (SQLite's WAL). Changes no record; called off
    /// the request path (`CommitFlusher`). One step at a time: true when the caller should call
    /// again with `continuing` (which goes on whatever is left).
    func reclaimFreeSpace(trimmingLog: Bool, continuing: Bool) throws(VaultError) -> Bool

    /// Runs `body` on one consistent snapshot. Inside a transaction (a `write`'s, say), `body`
    /// runs in it.
    func read<R: ~Copyable>(_ body: () throws(VaultError) -> R) throws(VaultError) -> R

    /// Runs a few statements (an operation's rotation check and its query) in one snapshot
    /// where that costs nothing more than the statements alone: SQLite's read transaction takes
    /// its locks once, where each statement alone takes them again. On PostgreSQL each
    /// statement is a snapshot of its own and a transaction would add round trips, so `body`
    /// just runs.
    func statements<R: ~Copyable>(_ body: () throws(VaultError) -> R) throws(VaultError) -> R

    /// Changes whenever anything is committed to the vault, by this connection or another.
    func changeToken() throws(VaultError) -> StorageChangeToken

    /// Changes whenever another connection commits to the vault; this connection's own commits
    /// leave it alone. What a vault compares to look for another process's rotation: its own
    /// writes already know what they changed, so they need not cost a look afterwards.
    func othersChangeToken() throws(VaultError) -> StorageChangeToken


    // MARK: format

    /// The format version the records are in (see `VaultFormat`).
    func formatVersion() throws(VaultError) -> Int
    /// Inside the `write` that brought the records to `version`, so both commit or neither.
    func setFormatVersion(_ version: Int) throws(VaultError)
    /// The storage's own part of upgrading to `version` (new tables or columns), inside the
    /// upgrade's `write`, before VaultCore rewrites records for it.
    func prepareStorage(forFormatVersion version: Int) throws(VaultError)

    // MARK: header

    /// Inside the `write` that creates the vault: its header, and node ids from `firstNodeID` on.
    func insertHeader(_ header: VaultHeader, firstNodeID: NodeID) throws(VaultError)
    /// nil when the header row is missing or unreadable.
    func header() throws(VaultError) -> VaultHeader?
    /// Inside the `write` of an upgrade that seals more of the header.
    func updateHeaderMAC(_ mac: [UInt8]) throws(VaultError)
    /// Takes the next node id; ids are never reused, even after their node is deleted.
    func allocateNodeID() throws(VaultError) -> NodeID
    /// The id `allocateNodeID` would hand out next, for verify.
    func nextNodeID() throws(VaultError) -> NodeID?

    // MARK: key slots

    /// Every slot, by id.
    func keySlots() throws(VaultError) -> [KeySlotRow]
    func upsertKeySlot(_ slot: KeySlotRow) throws(VaultError)
    /// Whether there was such a slot (a rotation drops the passphrase slots it cannot rewrap).
    @discardableResult
    func deleteKeySlot(id: Int64) throws(VaultError) -> Bool

    // MARK: TPM PIN slots (format 10 on)

    /// Every PIN slot, by id.
    func pinSlots() throws(VaultError) -> [PINSlotRow]
    func upsertPINSlot(_ slot: PINSlotRow) throws(VaultError)
    /// Whether there was such a slot.
    @discardableResult
    func deletePINSlot(id: Int64) throws(VaultError) -> Bool

    // MARK: member slots (format 6 on)

    /// Every member slot, by name.
    func memberSlots() throws(VaultError) -> [MemberSlotRow]
    /// Fails with `.alreadyExists` when the name or the public key already has a slot.
    func insertMemberSlot(_ slot: MemberSlotRow) throws(VaultError)
    /// Whether there was such a slot.
    @discardableResult
    func deleteMemberSlot(named name: [UInt8]) throws(VaultError) -> Bool

    // MARK: nodes

    func node(_ id: NodeID) throws(VaultError) -> NodeRow?
    /// The row stored under `tag` in `parent` (unique per parent).
    func node(in parent: NodeID, nameTag: [UInt8]) throws(VaultError) -> NodeRow?
    /// The rows whose parent is `parent`, the root's own row excluded.
    func children(of parent: NodeID) throws(VaultError) -> [NodeRow]
    func hasChildren(_ parent: NodeID) throws(VaultError) -> Bool
    /// nil when there is no such node.
    func parent(of id: NodeID) throws(VaultError) -> NodeID?
    /// Every node row by id, with whether it has a content, for verify and upgrades. Rows the
    /// storage cannot read as a `NodeRow` come as `.malformed`, so verify can name them.
    func everyNode() throws(VaultError) -> [StoredNode]
    func itemCount() throws(VaultError) -> Int
    /// nil when the node has no content (or does not exist).
    func sealedContent(of id: NodeID) throws(VaultError) -> [UInt8]?
    /// A node's row and its sealed content (nil for a dictionary), from one snapshot; nil when
    /// there is no such node. What an open reads.
    func nodeAndContent(_ id: NodeID) throws(VaultError) -> (row: NodeRow, sealedContent: [UInt8]?)?

    /// `sealedContent` is nil for dictionaries.
    func insertNode(_ row: NodeRow, sealedContent: [UInt8]?) throws(VaultError)
    func updateAttributes(of id: NodeID, sealedAttributes: [UInt8]) throws(VaultError)
    /// Both in one statement: a content is only ever stored with the attributes that bind it.
    func updateAttributesAndContent(of id: NodeID, sealedAttributes: [UInt8], sealedContent: [UInt8]) throws(VaultError)
    /// Moves a node under `parent` with a new tag, sealed name and sealed attributes.
    func relink(_ id: NodeID, to parent: NodeID, nameTag: [UInt8], sealedName: [UInt8],
                sealedAttributes: [UInt8]) throws(VaultError)
    /// Deletes the node and its content blocks.
    func deleteNode(_ id: NodeID) throws(VaultError)
    /// Deletes `id` and every node below it, with their content blocks.
    func deleteSubtree(_ id: NodeID) throws(VaultError)

    // MARK: content blocks (format 10 on)

    /// The stored blocks of `id` with an index in `range`, by index (a hole has no row).
    func contentBlocks(of id: NodeID, in range: Range<Int>) throws(VaultError) -> [ContentBlockRow]
    /// Inserts block `index` of `id`, or replaces the one stored there.
    func upsertContentBlock(_ row: ContentBlockRow, of id: NodeID) throws(VaultError)
    /// Deletes the blocks of `id` from `index` on.
    func deleteContentBlocks(of id: NodeID, from index: Int) throws(VaultError)
    /// Block rows whose node has no row, for verify.
    func orphanContentBlockCount() throws(VaultError) -> Int

    // MARK: a node's attributes (extended attributes)

    /// The row stored under `tag` for `node` (unique per node).
    func attribute(of node: NodeID, tag: [UInt8]) throws(VaultError) -> AttributeRow?
    /// Every attribute row of `node`.
    func attributes(of node: NodeID) throws(VaultError) -> [AttributeRow]
    /// Every attribute row, of any node, stored with `searchTag`: one indexed query.
    func attributes(withSearchTag searchTag: [UInt8]) throws(VaultError) -> [AttributeRow]
    /// Inserts the row, or replaces the one with the same node and tag.
    func upsertAttribute(_ row: AttributeRow) throws(VaultError)
    /// Whether there was such a row.
    @discardableResult
    func deleteAttribute(of node: NodeID, tag: [UInt8]) throws(VaultError) -> Bool
    /// Deletes the attributes of `node`, or with `subtree` of every node below it as well;
    /// called before the nodes themselves are deleted, in the same transaction.
    func deleteAttributes(of node: NodeID, subtree: Bool) throws(VaultError)
    /// Every attribute row, for verify. Rows the storage cannot read come as `.malformed`.
    func everyAttribute() throws(VaultError) -> [StoredAttribute]

    // MARK: access rules

    /// Every rule row, by node id. A row the storage cannot read is an integrity failure.
    func ruleRows() throws(VaultError) -> [RuleRow]
    /// Inserts the row, or replaces the one of the same node.
    func upsertRule(_ row: RuleRow) throws(VaultError)
    /// Whether there was such a row.
    @discardableResult
    func deleteRule(of node: NodeID) throws(VaultError) -> Bool
    /// Deletes the rule row of `node`, or with `subtree` those of every node below it as well,
    /// and returns the rows deleted; called before the nodes themselves are deleted, in the
    /// same transaction.
    func deleteRules(of node: NodeID, subtree: Bool) throws(VaultError) -> [RuleRow]
    /// The MAC over every rule row; nil when it is missing (never, once at format 4).
    func rulesMAC() throws(VaultError) -> [UInt8]?
    /// In the same transaction as the rule rows it covers.
    func setRulesMAC(_ mac: [UInt8]) throws(VaultError)

    // MARK: generation (format 8 on)

    /// The cipher that seals the generation: while it is set, every write transaction raises
    /// the generation and seals the vault's state (`VaultState`) again before it commits, in
    /// the same transaction; nil (a vault holding no key) leaves both as they are. Set by the
    /// vault whenever its cipher changes; a rotation sets the new one inside its write.
    var generationCipher: (any GenerationSealer)? { get set }
    /// Whether the write under way changed a part the state binds (the header's, rules' or
    /// members' MAC): its stored MAC is then stale until the write seals it as it commits.
    var sealedPartsChanged: Bool { get }
    /// The generation the last write committed through this storage sealed; nil before any.
    var lastSealedGeneration: Int64? { get }
    /// The vault's row as `VaultState` binds it; nil when it is missing.
    func vaultState() throws(VaultError) -> VaultState?
    /// In the same transaction as the member slot rows it covers.
    func setMembersMAC(_ mac: [UInt8]) throws(VaultError)
    /// Raises the generation and seals the state with `cipher`, now: for the write that
    /// creates a vault, which has no cipher set yet. Other writes do it as they commit.
    func raiseGeneration(sealedBy cipher: any GenerationSealer) throws(VaultError)

    // MARK: access log

    /// One more than the highest batch sequence stored (1 for an empty log). Inside the `write`
    /// that appends, since the number is sealed into the batch before it is stored.
    func nextAccessLogSequence() throws(VaultError) -> Int64
    func appendAccessLogBatch(_ row: AccessLogRow) throws(VaultError)
    /// Replaces the sealed bytes of batch `sequence` (its clear columns stay): a rotation seals
    /// the same entries to the new log key.
    func replaceAccessLogBatch(sequence: Int64, sealed: [UInt8]) throws(VaultError)
    /// Batches whose `lastTime` is at or after `since` (every batch for nil) and whose sequence
    /// is above `afterSequence`, by sequence. Rows the storage cannot read come as `.malformed`.
    func accessLogBatches(since: Int64?, afterSequence: Int64?) throws(VaultError) -> [StoredAccessLogBatch]
    /// The sealed bytes of batch `sequence`; nil when there is none (or it is unreadable). What
    /// an append chains onto, and checks against the batch this machine saw.
    func sealedAccessLogBatch(sequence: Int64) throws(VaultError) -> [UInt8]?
    /// Deletes the oldest batches up to the last whose `lastTime` is before `olderThan`, then the
    /// oldest while the entries of the batches kept exceed `maximumEntries`; never the newest
    /// batch, and always a prefix, so the batches kept are one run of sequences. Inside the append's
    /// `write`. Gives the number of batches deleted.
    @discardableResult
    func pruneAccessLog(olderThan: Int64, maximumEntries: Int) throws(VaultError) -> Int
    /// How many batches and entries are stored, and the highest sequence (nil when empty):
    /// readable without keys, as the file shows them to anyone.
    func accessLogSummary() throws(VaultError) -> AccessLogSummary
}

extension VaultStorage {
    /// Two reads in one read transaction; a storage that can read both in one statement does.
    package func nodeAndContent(_ id: NodeID) throws(VaultError) -> (row: NodeRow, sealedContent: [UInt8]?)? {
        try read { () throws(VaultError) -> (row: NodeRow, sealedContent: [UInt8]?)? in
            guard let row = try node(id) else { return nil }
            return (row, try sealedContent(of: id))
        }
    }

    /// A node's row, its content record and the blocks in `blocks`, from one snapshot: what an
    /// open of a large item and each later read of blocks needs.
    package func nodeAndContent(_ id: NodeID, blocks: Range<Int>) throws(VaultError)
        -> (row: NodeRow, sealedContent: [UInt8]?, blocks: [ContentBlockRow])? {
        try read { () throws(VaultError) -> (row: NodeRow, sealedContent: [UInt8]?, blocks: [ContentBlockRow])? in
            guard let (row, content) = try nodeAndContent(id) else { return nil }
            return (row, content, blocks.isEmpty ? [] : try contentBlocks(of: id, in: blocks))
        }
    }

    package func write<R: ~Copyable>(_ durability: CommitDurability, _ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        try write(durability, seenByChangeToken: true, body)
    }
}

/// How a write transaction's commit reaches the disk.
package enum CommitDurability {
    /// On stable storage before `write` returns.
    case durable
    /// Survives a crash of the process, but not of the machine until the next `.durable` commit,
    /// whose sync takes it along, or `syncCarriedCommits`. For steps that a durable commit always
    /// follows, or that the caller makes durable within a bounded time (the mount's namespace
    /// changes, `CommitFlusher`).
    case carriedByNextDurableCommit
}

/// What tells whether anything was committed between two looks; only compared, never read.
package struct StorageChangeToken: Equatable, Sendable {
    private let counters: [Int64]
    package init(_ counters: Int64...) { self.counters = counters }
}

/// The vault's header as stored: not yet checked (the MAC is verified once a key is unwrapped).
package struct VaultHeader {
    package let vaultID: [UInt8]
    package let itemSizeLimit: Int
    package let mac: [UInt8]
    package init(vaultID: [UInt8], itemSizeLimit: Int, mac: [UInt8]) {
        self.vaultID = vaultID
        self.itemSizeLimit = itemSizeLimit
        self.mac = mac
    }
}

/// What the vault's row binds together at a generation (format 8 on): the header's MAC (the
/// master key and format), the rules' MAC (every rule record) and the members' MAC (every member
/// slot), each resealed when its records change, under one MAC with the generation
/// (`RecordCipher.stateMAC`). So rules or member rows (and their MAC) copied from an older copy
/// fail it, and the whole row copied back is an older generation, which `SeenGenerations` refuses.
package struct VaultState {
    package let generation: Int64
    package let headerMAC: [UInt8]
    package let rulesMAC: [UInt8]?
    package let membersMAC: [UInt8]?
    /// As stored; nil in a state about to be sealed, or before the upgrade to format 8.
    package let stateMAC: [UInt8]?
    package init(generation: Int64, headerMAC: [UInt8], rulesMAC: [UInt8]?, membersMAC: [UInt8]?, stateMAC: [UInt8]?) {
        self.generation = generation
        self.headerMAC = headerMAC
        self.rulesMAC = rulesMAC
        self.membersMAC = membersMAC
        self.stateMAC = stateMAC
    }
}

/// A key slot: the master key wrapped by a passphrase-derived key, and that derivation's cost.
package struct KeySlotRow {
    package let id: Int64
    package let parameters: KDFParameters
    package let salt: [UInt8]
    package let wrappedMasterKey: [UInt8]
    package init(id: Int64, parameters: KDFParameters, salt: [UInt8], wrappedMasterKey: [UInt8]) {
        self.id = id
        self.parameters = parameters
        self.salt = salt
        self.wrappedMasterKey = wrappedMasterKey
    }
}

/// A member's key slot: the master key in a sealed box (`crypto_box_seal`) to the member's
/// public key. The name and key are in clear for listing; the box binds both and the vault id
/// (`MemberSlot`), so a slot renamed, given another key or copied to another vault fails. After
/// the box, a MAC under the master key: a slot made without the key (a row added by hand) fails.
package struct MemberSlotRow {
    /// UTF-8.
    package let name: [UInt8]
    package let publicKey: [UInt8]
    package let sealedMasterKey: [UInt8]
    package init(name: [UInt8], publicKey: [UInt8], sealedMasterKey: [UInt8]) {
        self.name = name
        self.publicKey = publicKey
        self.sealedMasterKey = sealedMasterKey
    }
}

/// One node as stored. Nothing here is trusted until NodeStore has opened the sealed
/// attributes (which bind the id and incarnation) and found the same kind.
package struct NodeRow {
    package let id: NodeID
    package let parent: NodeID
    /// `NodeKind.rawValue` as stored, unchecked (it lets the storage find items and subtrees).
    package let kind: Int64
    package let incarnation: [UInt8]
    package let nameTag: [UInt8]
    package let sealedName: [UInt8]
    package let sealedAttributes: [UInt8]
    package init(id: NodeID, parent: NodeID, kind: Int64, incarnation: [UInt8], nameTag: [UInt8], sealedName: [UInt8], sealedAttributes: [UInt8]) {
        self.id = id
        self.parent = parent
        self.kind = kind
        self.incarnation = incarnation
        self.nameTag = nameTag
        self.sealedName = sealedName
        self.sealedAttributes = sealedAttributes
    }
}

/// One block of a large item's content (format 9) as stored: nothing here is trusted until
/// NodeStore has opened it with the generation the item's sealed map gives its index.
package struct ContentBlockRow {
    package let index: Int
    package let sealed: [UInt8]
    package init(index: Int, sealed: [UInt8]) {
        self.index = index
        self.sealed = sealed
    }
}

/// A row of `everyNode`.
package enum StoredNode {
    case row(NodeRow, hasContent: Bool)
    /// A row with missing or mistyped columns; its id when that much is readable.
    case malformed(id: Int64?)
}

/// One attribute of a node as stored: nothing here is trusted until NodeStore has opened the
/// sealed name and value, which bind the node, its incarnation and `tag`.
package struct AttributeRow {
    package let node: NodeID
    /// Keyed hash of (node, name): the row's key within its node.
    package let tag: [UInt8]
    /// Keyed hash of (name, value), the same on every node: what `find` looks up.
    package let searchTag: [UInt8]
    package let sealedName: [UInt8]
    package let sealedValue: [UInt8]
    package init(node: NodeID, tag: [UInt8], searchTag: [UInt8], sealedName: [UInt8], sealedValue: [UInt8]) {
        self.node = node
        self.tag = tag
        self.searchTag = searchTag
        self.sealedName = sealedName
        self.sealedValue = sealedValue
    }
}

/// A node's access rules as stored: nothing here is trusted until NodeStore has opened the
/// sealed record (bound to the node and its incarnation) and checked the MAC over all rows.
package struct RuleRow: Equatable {
    package let node: NodeID
    package let sealed: [UInt8]
    package init(node: NodeID, sealed: [UInt8]) {
        self.node = node
        self.sealed = sealed
    }
}

/// One batch of the access log as stored. Times (seconds since the epoch) and the count are in
/// clear and unchecked until the sealed batch, which carries all three, is opened.
package struct AccessLogRow {
    package let sequence: Int64
    package let firstTime: Int64
    package let lastTime: Int64
    package let entries: Int
    package let sealed: [UInt8]
    package init(sequence: Int64, firstTime: Int64, lastTime: Int64, entries: Int, sealed: [UInt8]) {
        self.sequence = sequence
        self.firstTime = firstTime
        self.lastTime = lastTime
        self.entries = entries
        self.sealed = sealed
    }
}

/// A row of `accessLogBatches`.
package enum StoredAccessLogBatch {
    case row(AccessLogRow)
    /// A row with missing or mistyped columns; its sequence when that much is readable.
    case malformed(sequence: Int64?)
}

/// A row of `everyAttribute`.
package enum StoredAttribute {
    case row(AttributeRow)
    /// A row with missing or mistyped columns; its node when that much is readable.
    case malformed(node: Int64?)
}
