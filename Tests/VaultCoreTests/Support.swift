import CSQLite
import Foundation
@_exported import TestSupport
import VaultCore

/// A fresh directory per test, removed afterwards, and where the test's vault goes in its engine
/// (a file in the directory, or a vault of its own name in the shared PostgreSQL database).
final class Scratch {
    let directory: String
    let engine: StorageEngine
    let vaultPath: String

    convenience init() { try! self.init(.sqlite) }

    init(_ engine: StorageEngine) throws {
        directory = FileManager.default.temporaryDirectory.path + "/vaultcore-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        self.engine = engine
        vaultPath = try engine.newVaultLocation(in: directory)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    /// The vault's rows, around keychainfs.
    func rawRows() throws -> any RawRows { try engine.rawRows(vaultPath) }
}

func secret(_ text: String) -> SecureBuffer {
    secret(Array(text.utf8))
}

func secret(_ bytes: [UInt8]) -> SecureBuffer {
    var buffer = try! SecureBuffer(capacity: bytes.count)
    bytes.withUnsafeBytes { try! buffer.append($0) }
    return buffer
}

extension SecureBuffer {
    /// Test-only: test canaries are not real secrets, so copying them out is fine here.
    var testBytes: [UInt8] { withUnsafeBytes { Array($0) } }
}

let passphrase = "correct horse battery staple"

func makeVault(_ scratch: Scratch, itemSizeLimit: Int = Vault.defaultItemSizeLimit) throws -> Vault {
    try Vault.create(at: scratch.vaultPath, passphrase: secret(passphrase), kdf: KDFPreset.interactive.parameters,
                     itemSizeLimit: itemSizeLimit)
}

func reopen(_ scratch: Scratch, with phrase: String = passphrase) throws -> Vault {
    try Vault.open(at: scratch.vaultPath, passphrase: secret(phrase))
}

func path(_ text: String) -> VaultPath { try! VaultPath(text) }

/// Raw SQL on the vault file, as an attacker with the file would do it.
func withRawDatabase<R>(_ file: String, _ body: (OpaquePointer) throws -> R) rethrows -> R {
    var db: OpaquePointer?
    precondition(sqlite3_open(file, &db) == SQLITE_OK)
    defer { sqlite3_close(db) }
    return try body(db!)
}

func rawExec(_ db: OpaquePointer, _ sql: String) {
    var error: UnsafeMutablePointer<CChar>?
    let rc = sqlite3_exec(db, sql, nil, nil, &error)
    precondition(rc == SQLITE_OK, "SQL failed: \(sql): \(error.map { String(cString: $0) } ?? "")")
}

func rawBlobs(_ db: OpaquePointer, _ sql: String) -> [(Int64, [UInt8])] {
    var statement: OpaquePointer?
    precondition(sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK)
    defer { sqlite3_finalize(statement) }
    var rows: [(Int64, [UInt8])] = []
    while sqlite3_step(statement) == SQLITE_ROW {
        let id = sqlite3_column_int64(statement, 0)
        let count = Int(sqlite3_column_bytes(statement, 1))
        let bytes = count == 0 ? [] : Array(UnsafeRawBufferPointer(start: sqlite3_column_blob(statement, 1), count: count))
        rows.append((id, bytes))
    }
    return rows
}

func rawSetBlob(_ db: OpaquePointer, table: String = "nodes", column: String, id: Int64, _ bytes: [UInt8]) {
    var statement: OpaquePointer?
    precondition(sqlite3_prepare_v2(db, "UPDATE \(table) SET \(column) = ? WHERE id = ?", -1, &statement, nil) == SQLITE_OK)
    defer { sqlite3_finalize(statement) }
    _ = bytes.withUnsafeBytes { sqlite3_bind_blob(statement, 1, $0.baseAddress, Int32($0.count), csqlite_transient()) }
    sqlite3_bind_int64(statement, 2, id)
    precondition(sqlite3_step(statement) == SQLITE_DONE)
}

/// Every byte of the vault's files (main database, WAL, shared memory).
func vaultFileBytes(_ file: String) -> [UInt8] {
    ["", "-wal", "-shm"].flatMap { suffix in (try? Data(contentsOf: URL(fileURLWithPath: file + suffix))).map(Array.init) ?? [] }
}

func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    Data(haystack).range(of: Data(needle)) != nil
}
