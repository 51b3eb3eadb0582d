import CSQLite

/// Raw rows of a vault file, with SQLite's own API.
package final class SQLiteRawRows: RawRows {
    private var db: OpaquePointer?

    package init(_ file: String) throws {
        guard sqlite3_open_v2(file, &db, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK else {
            sqlite3_close(db)
            throw FixtureError("cannot open \(file)")
        }
    }

    deinit { sqlite3_close(db) }

    private func statement(_ sql: String, _ blobs: [[UInt8]?] = [], _ row: (OpaquePointer) -> Void = { _ in }) throws {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else { throw FixtureError("\(sql): \(message)") }
        defer { sqlite3_finalize(statement) }
        for (index, blob) in blobs.enumerated() {
            if let blob {
                _ = blob.withUnsafeBytes { sqlite3_bind_blob(statement, Int32(index + 1), $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32($0.count), csqlite_transient()) }
            } else {
                sqlite3_bind_null(statement, Int32(index + 1))
            }
        }
        while true {
            switch sqlite3_step(statement) {
            case SQLITE_ROW: row(statement!)
            case SQLITE_DONE: return
            default: throw FixtureError("\(sql): \(message)")
            }
        }
    }

    private var message: String { String(cString: sqlite3_errmsg(db)) }

    private static func blob(_ statement: OpaquePointer, _ column: Int32) -> [UInt8]? {
        guard sqlite3_column_type(statement, column) != SQLITE_NULL else { return nil }
        let count = Int(sqlite3_column_bytes(statement, column))
        return count == 0 ? [] : Array(UnsafeRawBufferPointer(start: sqlite3_column_blob(statement, column), count: count))
    }

    package func blobs(_ table: String, _ column: String, key: String, where condition: String) throws -> [(Int64, [UInt8]?)] {
        var rows: [(Int64, [UInt8]?)] = []
        try statement("SELECT \(key), \(column) FROM \(table) WHERE \(condition) ORDER BY \(key)") {
            rows.append((sqlite3_column_int64($0, 0), SQLiteRawRows.blob($0, 1)))
        }
        return rows
    }

    package func setBlob(_ table: String, _ column: String, where condition: String, _ bytes: [UInt8]?) throws {
        try statement("UPDATE \(table) SET \(column) = ? WHERE \(condition)", [bytes])
    }

    package func update(_ table: String, set assignments: String, where condition: String) throws {
        try statement("UPDATE \(table) SET \(assignments) WHERE \(condition)")
    }

    package func delete(_ table: String, where condition: String) throws {
        try statement("DELETE FROM \(table) WHERE \(condition)")
    }

    package func insertCopies(_ table: String, setting column: String, to value: Int64, keeping columns: [String],
                      where condition: String) throws {
        let kept = columns.joined(separator: ", ")
        try statement("INSERT INTO \(table) (\(column), \(kept)) SELECT \(value), \(kept) FROM \(table) WHERE \(condition)")
    }

    package func vaultBlob(_ column: String) throws -> [UInt8]? {
        var value: [UInt8]? = nil
        try statement("SELECT \(column) FROM vault") { value = SQLiteRawRows.blob($0, 0) }
        return value
    }

    package func setVaultBlob(_ column: String, _ bytes: [UInt8]?) throws {
        try statement("UPDATE vault SET \(column) = ?", [bytes])
    }

    package func updateVaultRow(set assignments: String) throws {
        try statement("UPDATE vault SET \(assignments)")
    }

    package func setFormatVersion(_ version: Int) throws {
        try statement("PRAGMA user_version = \(version)")
    }
}
