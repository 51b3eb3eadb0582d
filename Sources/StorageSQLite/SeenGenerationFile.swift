import Glibc
import VaultStorageKit

/// The SQLite file that holds this machine's record of vault generations seen: storage only.
/// What a row means, its MAC and whether an older generation is refused are VaultCore's
/// (`SeenGenerations`); this keeps the SQL, with the engine, where the compiler keeps all of it.
/// One row per (location, vault id), each replacement one durable transaction (SQLite's journal
/// makes it atomic, as a temporary file renamed over the old one would).
package final class SeenGenerationFile {
    /// A row as stored, unchecked.
    package struct Row {
        package let generation: Int64
        package let headerMAC: [UInt8]
        package let mac: [UInt8]

        package init(generation: Int64, headerMAC: [UInt8], mac: [UInt8]) {
            self.generation = generation
            self.headerMAC = headerMAC
            self.mac = mac
        }
    }

    /// What `update` finds stored.
    package enum Stored {
        case row(Row)
        /// A row with missing or mistyped columns.
        case malformed
    }

    private static let schema = """
        PRAGMA synchronous = FULL;
        CREATE TABLE IF NOT EXISTS seen (
            location   BLOB    NOT NULL,
            vault_id   BLOB    NOT NULL,
            generation INTEGER NOT NULL,
            header_mac BLOB    NOT NULL,
            mac        BLOB    NOT NULL,
            PRIMARY KEY (location, vault_id)
        );
        """

    private let db: SQLiteConnection

    /// Opens the file at `path`, creating it (0600, parent directories 0700) and its table.
    package init(path: String) throws(VaultError) {
        try VaultFiles.createParentDirectories(of: path)
        var info = stat()
        if stat(path, &info) != 0 {
            do throws(VaultError) { try VaultFiles.createEmptyPrivateFile(path) } catch .vaultExists { /* made meanwhile */ }
        }
        db = try SQLiteConnection(path: path, create: false)
        try db.execute(SeenGenerationFile.schema)
    }

    /// In one write transaction: gives `decide` what is stored for (`location`, `vaultID`) (nil:
    /// nothing), and stores the row it returns in its place (nil: nothing to change).
    package func update(location: [UInt8], vaultID: [UInt8],
                        _ decide: (Stored?) throws(VaultError) -> Row?) throws(VaultError) {
        let key: [SQLValue] = [.blob(location), .blob(vaultID)]
        try db.writeTransaction { () throws(VaultError) in
            let row = try db.row("SELECT generation, header_mac, mac FROM seen WHERE location = ? AND vault_id = ?", key)
            var stored: Stored? = nil
            if let row, let generation = row[0].integer, let headerMAC = row[1].blob, let mac = row[2].blob {
                stored = .row(Row(generation: generation, headerMAC: headerMAC, mac: mac))
            } else if row != nil {
                stored = .malformed
            }
            guard let new = try decide(stored) else { return }
            try db.run("INSERT INTO seen (location, vault_id, generation, header_mac, mac) VALUES (?, ?, ?, ?, ?) "
                       + "ON CONFLICT (location, vault_id) DO UPDATE SET generation = excluded.generation, "
                       + "header_mac = excluded.header_mac, mac = excluded.mac",
                       key + [.integer(new.generation), .blob(new.headerMAC), .blob(new.mac)])
        }
    }
}
