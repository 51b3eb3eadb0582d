/// A vault's rows as stored, reached around keychainfs (what the tamper tests do as an attacker
/// with the file or a login to the database would): one way per engine, so the tests read alike
/// on both. Tables and columns have the same names in both engines; the vault's own row is
/// `vaultRow` (SQLite's singleton `vault`, PostgreSQL's row of `vaults`), and every other table
/// is scoped to the vault. Conditions are SQL that both dialects read ("id = 3", "parent = 1").
package protocol RawRows {
    /// `key` and `column` of the rows of `table` matching `condition`, by key.
    func blobs(_ table: String, _ column: String, key: String, where condition: String) throws -> [(Int64, [UInt8]?)]
    /// Sets `column` (NULL for nil) of the rows of `table` matching `condition`.
    func setBlob(_ table: String, _ column: String, where condition: String, _ bytes: [UInt8]?) throws
    /// Runs `UPDATE table SET assignments WHERE condition` (integers and NULLs).
    func update(_ table: String, set assignments: String, where condition: String) throws
    func delete(_ table: String, where condition: String) throws
    /// Inserts a copy of each row of `table` matching `condition` with `column` set to `value`
    /// and `columns` as they were: rows copied onto another node, say.
    func insertCopies(_ table: String, setting column: String, to value: Int64, keeping columns: [String],
                      where condition: String) throws
    /// A column of the vault's own row.
    func vaultBlob(_ column: String) throws -> [UInt8]?
    func setVaultBlob(_ column: String, _ bytes: [UInt8]?) throws
    /// `UPDATE` of the vault's own row (integers).
    func updateVaultRow(set assignments: String) throws
    /// The format version as stored (SQLite's user_version, PostgreSQL's format_version).
    func setFormatVersion(_ version: Int) throws
}

extension RawRows {
    package func blobs(_ table: String, _ column: String, where condition: String) throws -> [(Int64, [UInt8]?)] {
        try blobs(table, column, key: "id", where: condition)
    }

    /// The one row's column; fails the fixture when there is not exactly one.
    package func blob(_ table: String, _ column: String, id: Int64) throws -> [UInt8]? {
        let rows = try blobs(table, column, where: "id = \(id)")
        guard rows.count == 1 else { throw FixtureError("\(rows.count) rows of \(table) with id \(id)") }
        return rows[0].1
    }

    package func setBlob(_ table: String, _ column: String, id: Int64, _ bytes: [UInt8]?) throws {
        try setBlob(table, column, where: "id = \(id)", bytes)
    }
}
