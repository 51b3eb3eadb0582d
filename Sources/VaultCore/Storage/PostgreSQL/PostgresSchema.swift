/// The PostgreSQL layout of vaults: the tables of SQLite's layout with the vault's name first
/// in every key, so several vaults share one database. The `vaults` row holds what SQLite keeps
/// in its singleton row and `user_version`. `keychainfs_schema` numbers the layout of the
/// tables themselves, apart from the format of the records (a vault's `format_version`).
enum PostgresSchema {
    /// The layout these tables have; `open` refuses a database with a newer one.
    static let version: Int64 = 1

    /// Idempotent, under an advisory lock so two first `init`s do not race to create tables.
    static let tables = """
        SELECT pg_advisory_xact_lock(1262698307);
        CREATE TABLE IF NOT EXISTS keychainfs_schema (
            singleton integer PRIMARY KEY CHECK (singleton = 1),
            version   bigint  NOT NULL
        );
        INSERT INTO keychainfs_schema (singleton, version) VALUES (1, \(version)) ON CONFLICT (singleton) DO NOTHING;
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
}
