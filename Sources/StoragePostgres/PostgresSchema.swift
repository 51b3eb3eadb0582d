import VaultStorageKit
/// The PostgreSQL layout of vaults: the tables of SQLite's layout with the vault's name first
/// in every key, so several vaults share one database. The `vaults` row holds what SQLite keeps
/// in its singleton row and `user_version`. `keychainfs_schema` numbers the layout of the
/// tables themselves, apart from the format of the records (a vault's `format_version`).
///
/// The layout upgrades as the file format does: numbered steps, applied in order in one
/// transaction under an advisory lock, by whichever `init` or open first meets an older
/// layout; a newer layout is refused.
enum PostgresSchema {
    /// The layout these tables have; `open` refuses a database with a newer one.
    static var version: Int64 { Int64(steps.count) }

    /// Every change of the layout takes it, so two first `init`s (or two upgrades) do not race.
    private static let lock = "SELECT pg_advisory_xact_lock(1262698307)"

    private static let versionTable = """
        CREATE TABLE IF NOT EXISTS keychainfs_schema (
            singleton integer PRIMARY KEY CHECK (singleton = 1),
            version   bigint  NOT NULL
        )
        """

    /// `steps[n - 1]` brings the tables from layout n - 1 to n. A released step is never
    /// edited: databases at the layout before it exist.
    static let steps = [layout1, layout2, layout3, layout4]

    /// The first layout, as the first release created it (without its version row).
    static let layout1 = """
        CREATE TABLE IF NOT EXISTS vaults (
            name            text   PRIMARY KEY,
            format_version  bigint NOT NULL DEFAULT 0,
            vault_id        bytea,
            item_size_limit bigint,
            next_node_id    bigint,
            header_mac      bytea,
            rules_mac       bytea
        );
        CREATE TABLE IF NOT EXISTS key_slots (
            vault              text   NOT NULL REFERENCES vaults (name),
            id                 bigint NOT NULL,
            kdf_algorithm      bigint NOT NULL,
            kdf_opslimit       bigint NOT NULL,
            kdf_memlimit       bigint NOT NULL,
            salt               bytea  NOT NULL,
            wrapped_master_key bytea  NOT NULL,
            PRIMARY KEY (vault, id)
        );
        CREATE TABLE IF NOT EXISTS member_slots (
            vault             text  NOT NULL REFERENCES vaults (name),
            name              bytea NOT NULL,
            public_key        bytea NOT NULL,
            sealed_master_key bytea NOT NULL,
            PRIMARY KEY (vault, name),
            UNIQUE (vault, public_key)
        );
        CREATE TABLE IF NOT EXISTS nodes (
            vault       text   NOT NULL REFERENCES vaults (name),
            id          bigint NOT NULL,
            parent      bigint NOT NULL,
            kind        bigint NOT NULL,
            incarnation bytea  NOT NULL,
            name_tag    bytea  NOT NULL,
            name        bytea  NOT NULL,
            attributes  bytea  NOT NULL,
            content     bytea,
            PRIMARY KEY (vault, id),
            UNIQUE (vault, parent, name_tag)
        );
        CREATE TABLE IF NOT EXISTS attributes (
            vault      text   NOT NULL REFERENCES vaults (name),
            node       bigint NOT NULL,
            tag        bytea  NOT NULL,
            search_tag bytea  NOT NULL,
            name       bytea  NOT NULL,
            value      bytea  NOT NULL,
            PRIMARY KEY (vault, node, tag)
        );
        CREATE INDEX IF NOT EXISTS attributes_by_search_tag ON attributes (vault, search_tag);
        CREATE TABLE IF NOT EXISTS rules (
            vault  text   NOT NULL REFERENCES vaults (name),
            node   bigint NOT NULL,
            sealed bytea  NOT NULL,
            PRIMARY KEY (vault, node)
        );
        CREATE TABLE IF NOT EXISTS access_log (
            vault      text   NOT NULL REFERENCES vaults (name),
            sequence   bigint NOT NULL,
            first_time bigint NOT NULL,
            last_time  bigint NOT NULL,
            entries    bigint NOT NULL,
            sealed     bytea  NOT NULL,
            PRIMARY KEY (vault, sequence)
        );
        """

    /// Layout 2: every write transaction that notifies also counts itself on the vault's row,
    /// so a connection that missed NOTIFYs (while it was reconnecting) still sees a change.
    static let layout2 = "ALTER TABLE vaults ADD COLUMN change_count bigint NOT NULL DEFAULT 0"

    /// Layout 3: the columns of format 8 (`VaultState`): the generation every write raises, the
    /// members' MAC and the MAC binding them with the header's and the rules'. A vault keeps
    /// its format 7 until it is opened with a key, which upgrades it and seals them.
    static let layout3 = """
        ALTER TABLE vaults ADD COLUMN generation bigint NOT NULL DEFAULT 0;
        ALTER TABLE vaults ADD COLUMN members_mac bytea;
        ALTER TABLE vaults ADD COLUMN state_mac bytea
        """

    /// Layout 4: the blocks of large items' contents (format 9), one row each.
    static let layout4 = """
        CREATE TABLE IF NOT EXISTS content_blocks (
            vault  text   NOT NULL REFERENCES vaults (name),
            node   bigint NOT NULL,
            idx    bigint NOT NULL,
            sealed bytea  NOT NULL,
            PRIMARY KEY (vault, node, idx)
        )
        """

    /// The layout the database's tables have; 0 before any. A number below 1 in the row was
    /// put there by hand (keychainfs writes none): refused, as it would index no upgrade step.
    static func storedVersion(_ db: PostgresConnection, at displayName: String) throws(VaultError) -> Int64 {
        guard try db.row("SELECT to_regclass('keychainfs_schema') IS NOT NULL")?.first?.integer == 1 else { return 0 }
        guard let row = try db.row("SELECT version FROM keychainfs_schema WHERE singleton = 1") else { return 0 }
        guard let stored = row.first?.integer, stored >= 1 else {
            throw .notAVault(path: displayName, reason: "its PostgreSQL tables claim a layout no keychainfs writes")
        }
        return stored
    }

    static func refuseNewer(_ stored: Int64, at displayName: String) throws(VaultError) {
        guard stored <= version else {
            throw .notAVault(path: displayName, reason: "its PostgreSQL tables are of layout \(stored), newer than this keychainfs "
                                 + "reads (\(version)); upgrade keychainfs")
        }
    }

    /// Inside a transaction: brings the tables to `version` from whatever layout they have,
    /// rereading it under the lock (another process may have just upgraded them).
    static func upgrade(_ db: PostgresConnection, at displayName: String) throws(VaultError) {
        try db.execute(lock)
        try db.execute(versionTable)
        let stored = try storedVersion(db, at: displayName)
        try refuseNewer(stored, at: displayName)
        guard stored < version else { return }
        for step in steps[Int(stored)...] { try db.execute(step) }
        try db.run("INSERT INTO keychainfs_schema (singleton, version) VALUES (1, $1) ON CONFLICT (singleton) DO UPDATE SET version = excluded.version",
                   [.integer(version)])
    }
}
