import Foundation
import Glibc

/// A real PostgreSQL server of its own for a test: a fresh cluster in a temporary directory,
/// listening on a Unix socket there (and, with `Options.tcp`, on 127.0.0.1), trusting local
/// connections. As root it runs as the `postgres` system user (the server refuses root),
/// which Debian's package creates.
package final class PostgresServer {
    /// How the server is started; the defaults give a Unix socket only.
    package struct Options {
        /// Listen on 127.0.0.1 too, on a free port.
        package var tcp = false
        /// Serve TLS with this certificate and key (PEM files); TCP then takes TLS only.
        package var tls: (certificate: String, key: String)? = nil
        /// More `-c name=value` settings.
        package var settings: [String] = []

        package init(tcp: Bool = false, tls: (certificate: String, key: String)? = nil, settings: [String] = []) {
            self.tcp = tcp
            self.tls = tls
            self.settings = settings
        }
    }

    /// The server's programs: Debian keeps each major version apart
    /// (`/usr/lib/postgresql/MAJOR/bin`, initdb and postgres not on PATH); the newest installed.
    package static let binaries: String = {
        let root = "/usr/lib/postgresql"
        let majors = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        for major in majors.reversed() where FileManager.default.isExecutableFile(atPath: "\(root)/\(major)/bin/initdb") {
            return "\(root)/\(major)/bin"
        }
        return root + "/bin"  // none: the first use says what is missing
    }()
    /// Whether the server's programs are there to start one.
    package static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: binaries + "/initdb") }
    package let directory: String
    package let socketDirectory: String
    /// Also the Unix socket's number (`.s.PGSQL.PORT`).
    package let port: Int
    private let options: Options
    private var server: Process

    package convenience init() throws { try self.init(Options()) }

    package init(_ options: Options) throws {
        self.options = options
        directory = "/tmp/kcfs-pg-" + UUID().uuidString.prefix(8)
        socketDirectory = directory + "/socket"
        port = options.tcp ? try freeLocalPort() : 5432
        let data = directory + "/data"
        try FileManager.default.createDirectory(atPath: socketDirectory, withIntermediateDirectories: true)
        if let tls = options.tls {
            // The server wants its key private to it, in a directory it can read.
            for (source, name) in [(tls.certificate, "server.crt"), (tls.key, "server.key")] {
                try FileManager.default.copyItem(atPath: source, toPath: directory + "/" + name)
            }
            chmod(directory + "/server.key", 0o600)
        }
        if getuid() == 0 {
            guard let user = getpwnam("postgres") else { throw FixtureError("no postgres user: install postgresql") }
            for path in [directory, socketDirectory, directory + "/server.crt", directory + "/server.key"] {
                chown(path, user.pointee.pw_uid, user.pointee.pw_gid)
            }
        }
        let initdb = try run("/usr/bin/setpriv", PostgresServer.asServerUser([PostgresServer.binaries + "/initdb", "-D", data,
                                                                              "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]))
        guard initdb.status == 0 else { throw FixtureError("initdb failed: \(initdb.stderr)") }
        if options.tls != nil {
            // Over TCP only TLS is let in: a test that connects at all connected with it.
            try "local all all trust\nhostssl all all 127.0.0.1/32 trust\n".write(toFile: data + "/pg_hba.conf", atomically: false, encoding: .utf8)
        }
        server = Process()
        try start()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    private var arguments: [String] {
        var arguments = [PostgresServer.binaries + "/postgres", "-D", directory + "/data", "-k", socketDirectory, "-p", String(port),
                         "-c", "listen_addresses=" + (options.tcp ? "127.0.0.1" : "")]
        if options.tls != nil {
            arguments += ["-c", "ssl=on", "-c", "ssl_cert_file=\(directory)/server.crt", "-c", "ssl_key_file=\(directory)/server.key"]
        }
        for setting in options.settings { arguments += ["-c", setting] }
        return arguments
    }

    /// Starts the server on the cluster's data directory and waits until it takes connections.
    private func start() throws {
        server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        server.arguments = PostgresServer.asServerUser(arguments)
        // Its log goes to a file: a pipe nobody reads would stall it once full.
        let log = directory + "/server.log"
        if !FileManager.default.fileExists(atPath: log) { FileManager.default.createFile(atPath: log, contents: nil) }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        handle.seekToEndOfFile()
        server.standardOutput = handle
        server.standardError = handle
        server.standardInput = FileHandle.nullDevice
        try server.run()
        let ready = try eventually(within: 90) {
            guard server.isRunning else { return false }
            return try run(PostgresServer.binaries + "/pg_isready", ["-q", "-h", socketDirectory, "-p", String(port)]).status == 0
        }
        guard ready else {
            stop()
            throw FixtureError("PostgreSQL did not start: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        }
    }

    /// `setpriv` execs the command itself, so the process started is the server, signalled by pid.
    private static func asServerUser(_ command: [String]) -> [String] {
        getuid() == 0 ? ["--reuid", "postgres", "--regid", "postgres", "--init-groups", "--"] + command : ["--"] + command
    }

    /// Fast shutdown (SIGINT), waited for.
    package func stop() {
        if server.isRunning {
            resume()
            kill(server.processIdentifier, SIGINT)
            server.waitUntilExit()
        }
    }

    /// Starts the server again on the same data directory, socket and port.
    package func restart() throws {
        stop()
        try start()
    }

    /// The server and every backend stop answering (SIGSTOP), as a hung machine would.
    package func suspend() { signalEveryProcess(SIGSTOP) }

    package func resume() { signalEveryProcess(SIGCONT) }

    /// The postmaster and its children (backends and helpers).
    private func signalEveryProcess(_ signal: Int32) {
        guard server.isRunning else { return }
        let postmaster = server.processIdentifier
        kill(postmaster, signal)
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries {
            guard let pid = pid_t(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            // After the command name: state, then the parent's pid.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, pid_t(fields[1]) == postmaster { kill(pid, signal) }
        }
    }

    /// Creates a database and gives the libpq URI of it, over the Unix socket.
    package func createDatabase(_ name: String) throws -> String {
        let created = try run(PostgresServer.binaries + "/createdb", ["-h", socketDirectory, "-p", String(port), "-U", "postgres", name])
        guard created.status == 0 else { throw FixtureError("createdb failed: \(created.stderr)") }
        return "postgresql:///\(name)?host=\(socketDirectory)&user=postgres" + (port == 5432 ? "" : "&port=\(port)")
    }

    /// `pg_dump` of a database, as plain SQL.
    package func dump(_ database: String) throws -> String {
        let dumped = try run(PostgresServer.binaries + "/pg_dump", ["-h", socketDirectory, "-p", String(port), "-U", "postgres", database])
        guard dumped.status == 0 else { throw FixtureError("pg_dump failed: \(dumped.stderr)") }
        return dumped.stdoutText
    }

    /// Runs SQL with psql in `database`; its rows unaligned, one a line.
    @discardableResult
    package func sql(_ database: String, _ statements: String) throws -> String {
        let result = try run("/usr/bin/psql", ["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", socketDirectory, "-p", String(port),
                                               "-U", "postgres", "-d", database, "-c", statements])
        guard result.status == 0 else { throw FixtureError("psql failed: \(result.stderr)") }
        return result.stdoutText
    }
}
