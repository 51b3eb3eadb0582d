import Foundation
import Glibc

/// The engines a storage contract case runs on: every behavioural test of VaultCore that takes
/// one runs on each (`@Test(arguments: StorageEngine.all)`), through the same Vault API.
package enum StorageEngine: String, Sendable, CustomStringConvertible {
    case sqlite
    case postgreSQL

    package var description: String { rawValue }

    /// SQLite always. PostgreSQL when its server programs are installed, and always under CI
    /// (`CI=true`), where a server that cannot be started fails its cases instead of leaving
    /// them out. Left out elsewhere, it says so once on stderr: the cases were not run.
    package static let all: [StorageEngine] = {
        // `scripts/test --fast` leaves the server out; the full run never does.
        if ProcessInfo.processInfo.environment["KEYCHAINFS_TEST_STORAGE"] == "sqlite" { return [.sqlite] }
        if ProcessInfo.processInfo.environment["CI"] == "true" || PostgresServer.isInstalled { return [.sqlite, .postgreSQL] }
        FileHandle.standardError.write(Data(("storage contract: PostgreSQL cases NOT RUN: no server programs under "
            + "/usr/lib/postgresql (install postgresql; under CI=true their absence fails the cases)\n").utf8))
        return [.sqlite]
    }()

    /// Where a new vault of this engine goes: a file in `directory`, or a vault of its own name in
    /// the database of the one PostgreSQL server this test process shares (started on first use).
    package func newVaultLocation(in directory: String) throws -> String {
        switch self {
        case .sqlite: return directory + "/test.vault"
        case .postgreSQL: return try SharedPostgres.database() + "#v" + UUID().uuidString.prefix(13).lowercased()
        }
    }

    /// The one way the tests reach a vault's raw rows in this engine, as an attacker with the
    /// file or a database login would.
    package func rawRows(_ location: String) throws -> any RawRows {
        switch self {
        case .sqlite: try SQLiteRawRows(location)
        case .postgreSQL: try PostgresRawRows(location)
        }
    }
}

/// One server for the whole test process, so that each case costs a vault, not a cluster; stopped
/// (and its directory removed) when the process exits.
enum SharedPostgres {
    // Set once, then only read; the server object is driven by nobody else.
    nonisolated(unsafe) private static let started: Result<(PostgresServer, String), FixtureError> = {
        do {
            let server = try PostgresServer()
            let uri = try server.createDatabase("contract")
            atexit { SharedPostgres.stop() }
            return .success((server, uri))
        } catch {
            return .failure(FixtureError("storage contract: the PostgreSQL server could not be started: \(error)"))
        }
    }()

    static func database() throws -> String { try started.get().1 }

    private static func stop() {
        guard case .success(let (server, _)) = started else { return }
        server.stop()
        try? FileManager.default.removeItem(atPath: server.directory)
    }
}
