import Foundation
import Glibc

/// A real PostgreSQL server of its own for a test: a fresh cluster in a temporary directory,
/// listening only on a Unix socket there, trusting local connections. As root it runs as the
/// `postgres` system user (the server refuses root), which Debian's package creates.
final class PostgresServer {
    static let binaries = "/usr/lib/postgresql/15/bin"
    let directory: String
    let socketDirectory: String
    private let server: Process

    init() throws {
        directory = "/tmp/kcfs-pg-" + UUID().uuidString.prefix(8)
        socketDirectory = directory + "/socket"
        let data = directory + "/data"
        try FileManager.default.createDirectory(atPath: socketDirectory, withIntermediateDirectories: true)
        if getuid() == 0 {
            guard let user = getpwnam("postgres") else { throw FixtureError("no postgres user: install postgresql") }
            for path in [directory, socketDirectory] { chown(path, user.pointee.pw_uid, user.pointee.pw_gid) }
        }
        let initdb = try run("/usr/bin/setpriv", PostgresServer.asServerUser([PostgresServer.binaries + "/initdb", "-D", data,
                                                                              "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]))
        guard initdb.status == 0 else { throw FixtureError("initdb failed: \(initdb.stderr)") }
        server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        server.arguments = PostgresServer.asServerUser([PostgresServer.binaries + "/postgres", "-D", data, "-k", socketDirectory,
                                                        "-c", "listen_addresses="])
        // Its log goes to a file: a pipe nobody reads would stall it once full.
        let log = directory + "/server.log"
        FileManager.default.createFile(atPath: log, contents: nil)
        server.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        server.standardError = server.standardOutput
        server.standardInput = FileHandle.nullDevice
        try server.run()
        let ready = try eventually(within: 90) {
            guard server.isRunning else { return false }
            return try run(PostgresServer.binaries + "/pg_isready", ["-q", "-h", socketDirectory]).status == 0
        }
        guard ready else {
            stop()
            throw FixtureError("PostgreSQL did not start: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        }
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// `setpriv` execs the command itself, so the process started is the server, signalled by pid.
    private static func asServerUser(_ command: [String]) -> [String] {
        getuid() == 0 ? ["--reuid", "postgres", "--regid", "postgres", "--init-groups", "--"] + command : ["--"] + command
    }

    /// Fast shutdown (SIGINT), waited for.
    func stop() {
        if server.isRunning {
            kill(server.processIdentifier, SIGINT)
            server.waitUntilExit()
        }
    }

    /// Creates a database and gives the libpq URI of it.
    func createDatabase(_ name: String) throws -> String {
        let created = try run(PostgresServer.binaries + "/createdb", ["-h", socketDirectory, "-U", "postgres", name])
        guard created.status == 0 else { throw FixtureError("createdb failed: \(created.stderr)") }
        return "postgresql:///\(name)?host=\(socketDirectory)&user=postgres"
    }

    /// `pg_dump` of a database, as plain SQL.
    func dump(_ database: String) throws -> String {
        let dumped = try run(PostgresServer.binaries + "/pg_dump", ["-h", socketDirectory, "-U", "postgres", database])
        guard dumped.status == 0 else { throw FixtureError("pg_dump failed: \(dumped.stderr)") }
        return dumped.stdoutText
    }
}
