import Foundation
@testable import StoragePostgres
import Testing
@testable import VaultCore

/// The tables' layout upgrades in numbered steps, as the file format does.
@Suite(.serialized, .tags(.postgres, .slow)) struct PostgresSchemaTests {
    @Test func aLayoutOneDatabaseIsUpgradedWithItsVaultIntactAndANewerOneIsRefused() throws {
        let server = try PostgresServer()
        let uri = try server.createDatabase("old")
        let vault = try CLIFixture(vault: uri)
        #expect(try vault.cli(["set", "kept", "from layout 1"]).exitStatus == .success)
        // Back to layout 1, and checked to be exactly what layout 1's DDL makes. The vault's
        // state (layout 3's columns) is kept aside: a format 8 vault without it is refused.
        let state = try server.sql("old", "SELECT generation || ',' || encode(members_mac, 'hex') || ',' || encode(state_mac, 'hex') FROM vaults")
            .trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ",")
        try #require(state.count == 3)
        try server.sql("old", "ALTER TABLE vaults DROP COLUMN change_count, DROP COLUMN generation, DROP COLUMN members_mac, "
                           + "DROP COLUMN state_mac; DROP TABLE content_blocks; UPDATE keychainfs_schema SET version = 1")
        _ = try server.createDatabase("reference")
        try server.sql("reference", """
            CREATE TABLE keychainfs_schema (singleton integer PRIMARY KEY CHECK (singleton = 1), version bigint NOT NULL);
            \(PostgresSchema.layout1)
            """)
        let layoutOf = { (database: String) throws -> String in
            try server.sql(database, """
                SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
                FROM information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, ordinal_position
                """)
        }
        #expect(try layoutOf("old") == (try layoutOf("reference")))

        #expect(try vault.cli(["get", "kept"]).exitStatus == .integrityFailure)
        #expect(try server.sql("old", "SELECT version FROM keychainfs_schema") == "4\n")
        try server.sql("old", "UPDATE vaults SET generation = \(state[0]), members_mac = decode('\(state[1])', 'hex'), "
                           + "state_mac = decode('\(state[2])', 'hex')")
        #expect(try vault.cli(["get", "kept"]).stdoutText == "from layout 1")
        let count = Int(try server.sql("old", "SELECT change_count FROM vaults WHERE name = 'default'").dropLast()) ?? -1
        #expect(try vault.cli(["set", "later", "x"]).exitStatus == .success)
        #expect((Int(try server.sql("old", "SELECT change_count FROM vaults WHERE name = 'default'").dropLast()) ?? -1) > count)
        #expect(try vault.cli(["verify"]).exitStatus == .success)

        try server.sql("old", "UPDATE keychainfs_schema SET version = 99")
        let refused = try vault.cli(["ls"])
        #expect(refused.exitStatus == .unusableVault, "\(refused.stderr)")
        #expect(refused.stderr.split(separator: "\n").count == 1)
        #expect(refused.stderr.contains("its PostgreSQL tables are of layout 99, newer than this keychainfs reads (4)"), "\(refused.stderr)")

        // A number no keychainfs writes (set by hand) is refused by every command, init too
        // (which upgrades first), and never indexes an upgrade step.
        for edited in ["0", "-1"] {
            try server.sql("old", "UPDATE keychainfs_schema SET version = \(edited)")
            for arguments in [["ls", "--vault", uri], ["init", "--vault", uri + "#another", "--kdf", "interactive"]] {
                let result = try run(keychainfsBinary, arguments + ["--passphrase-file", vault.passphraseFile])
                #expect(result.exitStatus == .unusableVault && result.stderr.contains("a layout no keychainfs writes"),
                        "layout \(edited), \(arguments[0]): \(result.status) \(result.stderr)")
            }
        }
        try server.sql("old", "UPDATE keychainfs_schema SET version = 3")
        #expect(try vault.cli(["get", "kept"]).stdoutText == "from layout 1")
    }
}
