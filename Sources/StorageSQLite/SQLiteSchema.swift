import VaultStorageKit
/// The SQLite layout of a vault: SQLite's own header carries the application id and the format
/// version (PRAGMA application_id / user_version), so no custom header is invented.
enum SQLiteSchema {
    /// The tables of a vault of `VaultFormat.version`; `migrations` brings older ones here.
    static let tables = """
        CREATE TABLE vault (
            singleton        INTEGER PRIMARY KEY CHECK (singleton = 1),
            vault_id         BLOB    NOT NULL,
            item_size_limit  INTEGER NOT NULL,
            next_node_id     INTEGER NOT NULL,
            header_mac       BLOB    NOT NULL
        );
        CREATE TABLE key_slots (
            id                 INTEGER PRIMARY KEY,
            kdf_algorithm      INTEGER NOT NULL,
            kdf_opslimit       INTEGER NOT NULL,
            kdf_memlimit       INTEGER NOT NULL,
            salt               BLOB    NOT NULL,
            wrapped_master_key BLOB    NOT NULL
        );
        CREATE TABLE nodes (
            id         INTEGER PRIMARY KEY,
            parent     INTEGER NOT NULL,
            kind       INTEGER NOT NULL,
            incarnation BLOB   NOT NULL,
            name_tag   BLOB    NOT NULL,
            name       BLOB    NOT NULL,
            attributes BLOB    NOT NULL,
            content    BLOB,
            UNIQUE (parent, name_tag)
        );
        \(attributesTable)
        \(rulesTable)
        \(accessLogTable)
        \(memberSlotsTable)
        \(generationColumns)
        \(contentBlocksTable)
        """

    /// Format 9: the blocks of large items' contents, one row each, keyed by node and index. A
    /// rowid table: rows of a few KiB are what SQLite advises against `WITHOUT ROWID` for.
    static let contentBlocksTable = """
        CREATE TABLE content_blocks (
            node   INTEGER NOT NULL,
            idx    INTEGER NOT NULL,
            sealed BLOB    NOT NULL,
            PRIMARY KEY (node, idx)
        );
        """

    /// A node's attributes (extended attributes), one row each, keyed by node and tag; the
    /// search tag is indexed for `find`, the node (first in the key) for listing and deleting.
    static let attributesTable = """
        CREATE TABLE attributes (
            node       INTEGER NOT NULL,
            tag        BLOB    NOT NULL,
            search_tag BLOB    NOT NULL,
            name       BLOB    NOT NULL,
            value      BLOB    NOT NULL,
            UNIQUE (node, tag)
        );
        CREATE INDEX attributes_by_search_tag ON attributes (search_tag);
        """

    /// Access rules: one sealed record per ruled node, and the MAC over all of them in the
    /// vault's row (NULL only until the upgrade to format 4 writes the MAC of no rules).
    static let rulesTable = """
        CREATE TABLE rules (
            node   INTEGER PRIMARY KEY,
            sealed BLOB    NOT NULL
        );
        ALTER TABLE vault ADD COLUMN rules_mac BLOB;
        """

    /// The access log: one row per batch of entries, sealed to the vault's log key (see
    /// `AccessLogSealer`). Times and the entry count are in clear, so pruning and `--since` need
    /// no key; who, what and the decision are only inside `sealed`.
    static let accessLogTable = """
        CREATE TABLE access_log (
            sequence   INTEGER PRIMARY KEY,
            first_time INTEGER NOT NULL,
            last_time  INTEGER NOT NULL,
            entries    INTEGER NOT NULL,
            sealed     BLOB    NOT NULL
        );
        """

    /// What the tables need to reach each format version from the one before, by target
    /// version. Version 2 changed only what the attributes hold, not the tables; version 3 added
    /// the table of attributes; version 4 the access rules and the access log; version 5 none
    /// (item properties are rows of the attributes table); version 6 the members' key slots;
    /// version 8 the generation's columns; version 9 the content blocks.
    static let migrations: [Int: String] = [3: attributesTable, 4: rulesTable + accessLogTable, 6: memberSlotsTable,
                                            8: generationColumns, 9: contentBlocksTable]

    /// Format 8: the generation every write raises, the MAC over the member slots and the MAC
    /// that binds both with the header's and the rules' (`VaultState`); NULL until the upgrade.
    static let generationColumns = """
        ALTER TABLE vault ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE vault ADD COLUMN members_mac BLOB;
        ALTER TABLE vault ADD COLUMN state_mac BLOB;
        """

    /// Members' key slots (format 6): the master key sealed to each member's public key.
    static let memberSlotsTable = """
        CREATE TABLE member_slots (
            name              BLOB PRIMARY KEY,
            public_key        BLOB NOT NULL UNIQUE,
            sealed_master_key BLOB NOT NULL
        );
        """

    /// Per connection: durable commits (WAL synced at every commit), overwrite freed pages
    /// so replaced ciphertexts do not linger, wait out other writers rather than fail.
    static let connectionPragmas = """
        PRAGMA synchronous = FULL;
        PRAGMA secure_delete = ON;
        PRAGMA foreign_keys = OFF;
        PRAGMA journal_size_limit = 4194304;
        """
}
