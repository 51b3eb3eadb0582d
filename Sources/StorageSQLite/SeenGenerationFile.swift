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
        /// The TPM counter's handle and the value it has once this row is written (nil: none).
        package let counter: (handle: UInt32, value: UInt64)?

        package init(generation: Int64, headerMAC: [UInt8], mac: [UInt8], counter: (handle: UInt32, value: UInt64)? = nil) {
            self.generation = generation
            self.headerMAC = headerMAC
            self.mac = mac
            self.counter = counter
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
            nv_handle  INTEGER,
            nv_count   INTEGER,
            PRIMARY KEY (location, vault_id)
        );
        CREATE TABLE IF NOT EXISTS log_heads (
            location   BLOB    NOT NULL,
            vault_id   BLOB    NOT NULL,
            sequence   INTEGER NOT NULL,
            digest     BLOB    NOT NULL,
            PRIMARY KEY (location, vault_id)
        );
        """
    /// Files made before the TPM counter lack its columns; SQLite adds them in place.
    private static let counterColumns = ["nv_handle", "nv_count"]

    private let db: SQLiteConnection
    private let lockPath: String

    /// Opens the file at `path`, creating it (0600, parent directories 0700) and its table.
    package init(path: String) throws(VaultError) {
        try VaultFiles.createParentDirectories(of: path)
        var info = stat()
        if stat(path, &info) != 0 {
            do throws(VaultError) { try VaultFiles.createEmptyPrivateFile(path) } catch .vaultExists { /* made meanwhile */ }
        }
        db = try SQLiteConnection(path: path, create: false)
        lockPath = path + ".lock"
        try db.execute(SeenGenerationFile.schema)
        let columns = try db.rows("PRAGMA table_info(seen)").compactMap { $0[1].blob.map { String(decoding: $0, as: UTF8.self) } }
        for column in SeenGenerationFile.counterColumns where !columns.contains(column) {
            do throws(VaultError) { try db.execute("ALTER TABLE seen ADD COLUMN \(column) INTEGER") } catch {
                // Added meanwhile by another process.
                guard try db.rows("PRAGMA table_info(seen)").contains(where: { $0[1].blob == Array(column.utf8) }) else { throw error }
            }
        }
    }

    /// Runs `body` holding this file's lock (flock on `generations.sqlite.lock`, beside it):
    /// a row and the TPM counter it records change together, not only the row in SQLite's
    /// transaction, so two processes do not interleave between the row and the increment.
    package func locked<R>(_ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .storageFailure("\(lockPath): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { throw .storageFailure("\(lockPath): flock: \(String(cString: strerror(errno)))") }
        }
        return try body()
    }

    /// In one write transaction: gives `decide` what is stored for (`location`, `vaultID`) (nil:
    /// nothing), and stores the row it returns in its place (nil: nothing to change).
    package func update(location: [UInt8], vaultID: [UInt8],
                        _ decide: (Stored?) throws(VaultError) -> Row?) throws(VaultError) {
        let key: [SQLValue] = [.blob(location), .blob(vaultID)]
        try db.writeTransaction { () throws(VaultError) in
            let row = try db.row("SELECT generation, header_mac, mac, nv_handle, nv_count FROM seen WHERE location = ? AND vault_id = ?", key)
            var stored: Stored? = nil
            if let row, let generation = row[0].integer, let headerMAC = row[1].blob, let mac = row[2].blob,
               (row[3] == .null) == (row[4] == .null) {
                let counter = row[3].integer.flatMap { handle in
                    row[4].integer.map { (handle: UInt32(truncatingIfNeeded: handle), value: UInt64(bitPattern: $0)) }
                }
                stored = .row(Row(generation: generation, headerMAC: headerMAC, mac: mac, counter: counter))
            } else if row != nil {
                stored = .malformed
            }
            guard let new = try decide(stored) else { return }
            let counter: [SQLValue] = new.counter.map { [.integer(Int64($0.handle)), .integer(Int64(bitPattern: $0.value))] } ?? [.null, .null]
            try db.run("INSERT INTO seen (location, vault_id, generation, header_mac, mac, nv_handle, nv_count) VALUES (?, ?, ?, ?, ?, ?, ?) "
                       + "ON CONFLICT (location, vault_id) DO UPDATE SET generation = excluded.generation, "
                       + "header_mac = excluded.header_mac, mac = excluded.mac, nv_handle = excluded.nv_handle, nv_count = excluded.nv_count",
                       key + [.integer(new.generation), .blob(new.headerMAC), .blob(new.mac)] + counter)
        }
    }

    /// The newest access log batch recorded for (`location`, `vaultID`): its sequence and
    /// digest; nil when none is, or the row is malformed.
    package func logHead(location: [UInt8], vaultID: [UInt8]) throws(VaultError) -> (sequence: Int64, digest: [UInt8])? {
        guard let row = try db.row("SELECT sequence, digest FROM log_heads WHERE location = ? AND vault_id = ?",
                                   [.blob(location), .blob(vaultID)]),
              let sequence = row[0].integer, let digest = row[1].blob else { return nil }
        return (sequence, digest)
    }

    /// Records batch `sequence` and its digest as the newest seen, unless that or a newer one is
    /// (another batch at the same sequence is not newer: it is what replaced the one seen).
    package func recordLogHead(location: [UInt8], vaultID: [UInt8], sequence: Int64, digest: [UInt8]) throws(VaultError) {
        try db.writeTransaction { () throws(VaultError) in
            try db.run("INSERT INTO log_heads (location, vault_id, sequence, digest) VALUES (?, ?, ?, ?) "
                       + "ON CONFLICT (location, vault_id) DO UPDATE SET sequence = excluded.sequence, digest = excluded.digest "
                       + "WHERE excluded.sequence > log_heads.sequence",
                       [.blob(location), .blob(vaultID), .integer(sequence), .blob(digest)])
        }
    }

    /// Forgets the newest batch recorded (an older copy of the vault accepted as it is).
    package func forgetLogHead(location: [UInt8], vaultID: [UInt8]) throws(VaultError) {
        try db.writeTransaction { () throws(VaultError) in
            try db.run("DELETE FROM log_heads WHERE location = ? AND vault_id = ?", [.blob(location), .blob(vaultID)])
        }
    }
}
