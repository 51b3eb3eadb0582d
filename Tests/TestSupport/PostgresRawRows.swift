import CPostgres
import Glibc

/// Raw rows of a vault in PostgreSQL, with libpq: a connection of its own to the vault's
/// database, every statement scoped to the vault's name.
final class PostgresRawRows: RawRows {
    private let connection: OpaquePointer
    private let vault: String

    /// `location`: the vault's URI, its name after `#`.
    init(_ location: String) throws {
        guard let hash = location.lastIndex(of: "#") else { throw FixtureError("no vault name in \(location)") }
        vault = String(location[location.index(after: hash)...])
        guard let made = PQconnectdb(String(location[..<hash])) else { throw FixtureError("libpq: out of memory") }
        guard PQstatus(made) == CONNECTION_OK else {
            defer { PQfinish(made) }
            throw FixtureError("cannot connect: \(String(cString: PQerrorMessage(made)))")
        }
        connection = made
    }

    deinit { PQfinish(connection) }

    /// Runs `sql` with `$1` the vault's name and `$2...` the blobs (bytea in hex), rows as text.
    @discardableResult
    private func execute(_ sql: String, _ blobs: [[UInt8]?] = []) throws -> [[String?]] {
        let hex: (UInt8) -> String = { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }
        let values: [String?] = [vault] + blobs.map { $0.map { "\\x" + $0.map(hex).joined() } }
        var cStrings = values.map { $0.map { strdup($0) } ?? nil }
        defer { cStrings.forEach { free($0) } }
        let result = cStrings.withUnsafeMutableBufferPointer { pointers in
            pointers.withMemoryRebound(to: UnsafePointer<CChar>?.self) {
                PQexecParams(connection, sql, Int32(values.count), nil, $0.baseAddress, nil, nil, 0)
            }
        }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            throw FixtureError("\(sql): \(String(cString: PQerrorMessage(connection)))")
        }
        return (0..<PQntuples(result)).map { row in
            (0..<PQnfields(result)).map { column in
                PQgetisnull(result, row, column) == 1 ? nil : String(cString: PQgetvalue(result, row, column))
            }
        }
    }

    private static func bytes(_ text: String?) -> [UInt8]? {
        guard let text else { return nil }
        let digits = Array(text.utf8.dropFirst(2))  // "\x"
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
    }

    func blobs(_ table: String, _ column: String, key: String, where condition: String) throws -> [(Int64, [UInt8]?)] {
        try execute("SELECT \(key), \(column) FROM \(table) WHERE vault = $1 AND (\(condition)) ORDER BY \(key)").map {
            (Int64($0[0]!)!, PostgresRawRows.bytes($0[1]))
        }
    }

    func setBlob(_ table: String, _ column: String, where condition: String, _ bytes: [UInt8]?) throws {
        try execute("UPDATE \(table) SET \(column) = $2::bytea WHERE vault = $1 AND (\(condition))", [bytes])
    }

    func update(_ table: String, set assignments: String, where condition: String) throws {
        try execute("UPDATE \(table) SET \(assignments) WHERE vault = $1 AND (\(condition))")
    }

    func delete(_ table: String, where condition: String) throws {
        try execute("DELETE FROM \(table) WHERE vault = $1 AND (\(condition))")
    }

    func insertCopies(_ table: String, setting column: String, to value: Int64, keeping columns: [String],
                      where condition: String) throws {
        let kept = columns.joined(separator: ", ")
        try execute("INSERT INTO \(table) (vault, \(column), \(kept)) SELECT vault, \(value), \(kept) FROM \(table) "
                    + "WHERE vault = $1 AND (\(condition))")
    }

    func vaultBlob(_ column: String) throws -> [UInt8]? {
        PostgresRawRows.bytes(try execute("SELECT \(column) FROM vaults WHERE name = $1").first?[0] ?? nil)
    }

    func setVaultBlob(_ column: String, _ bytes: [UInt8]?) throws {
        try execute("UPDATE vaults SET \(column) = $2::bytea WHERE name = $1", [bytes])
    }

    func updateVaultRow(set assignments: String) throws {
        try execute("UPDATE vaults SET \(assignments) WHERE name = $1")
    }

    func setFormatVersion(_ version: Int) throws {
        try execute("UPDATE vaults SET format_version = \(version) WHERE name = $1")
    }
}
