import Foundation
import Glibc
import Testing

/// A team vault in a PostgreSQL server of its own, mounted twice by two members (ann and bob),
/// each mount its own daemon with its own member key and passphrase: two machines, as far as
/// the vault and the server can tell. Both run as this user, so they share what this machine
/// keeps of the vault (its offline replica, its record of generations seen), as a mount and a
/// command of one user do. Unmounted, and the server stopped, when released.
final class TeamVault {
    /// One member's mount; `log` collects what its daemon says (it runs with -f).
    final class Member {
        let name: String
        let fixture: CLIFixture
        let key: String
        let mountpoint: String
        let log: String
        fileprivate var daemon: ForegroundDaemon?

        fileprivate init(name: String, vault: String) throws {
            self.name = name
            fixture = try CLIFixture(create: false, passphrase: "\(name)'s own passphrase", vault: vault)
            key = fixture.directory + "/\(name).key"
            mountpoint = fixture.directory + "/mnt"
            log = fixture.directory + "/daemon.log"
            try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        }

        func path(_ relative: String) -> String { mountpoint + "/" + relative }

        var said: String { procText(log) }
    }

    let server: PostgresServer
    let database = "team"
    let owner: CLIFixture
    let ann: Member
    let bob: Member

    /// `annExtra` and `annEnvironment` go to ann's daemon only (a Secret Service beside it, say).
    init(annExtra: [String] = [], annEnvironment: [String: String] = [:]) throws {
        server = try PostgresServer()
        let uri = try server.createDatabase(database)
        owner = try CLIFixture(vault: uri)
        ann = try Member(name: "ann", vault: uri)
        bob = try Member(name: "bob", vault: uri)
        for member in [ann, bob] {
            let made = try run(keychainfsBinary, ["member", "init", "--member-key", member.key, "--kdf", "interactive",
                                                  "--passphrase-file", member.fixture.passphraseFile])
            guard made.exitStatus == .success, let publicKey = made.stdoutText.split(separator: "\n").last.map(String.init) else {
                throw FixtureError("member init failed: \(made.stderr)")
            }
            let added = try run(keychainfsBinary, ["member", "add", "--vault", uri, "--passphrase-file", owner.passphraseFile,
                                                   publicKey, "--name", member.name])
            guard added.exitStatus == .success else { throw FixtureError("member add failed: \(added.stderr)") }
        }
        for member in [ann, bob] {
            let isAnn = member === ann
            member.daemon = try ForegroundDaemon(member.fixture, mountpoint: member.mountpoint,
                                                 extra: ["--member-key", member.key] + (isAnn ? annExtra : []),
                                                 standardError: member.log, environment: isAnn ? annEnvironment : [:])
        }
    }

    deinit {
        for member in [ann, bob] {
            if isMounted(member.mountpoint) { _ = try? run(keychainfsBinary, ["unmount", member.mountpoint]) }
            member.daemon = nil
        }
    }

    /// SQL run by psql as the server's superuser; its rows, one a line.
    @discardableResult
    func sql(_ statement: String) throws -> String {
        let result = try run(PostgresServer.binaries + "/psql", ["-h", server.socketDirectory, "-U", "postgres", "-d", database,
                                                                 "-Atc", statement])
        guard result.status == 0 else { throw FixtureError("psql failed: \(result.stderr)") }
        return result.stdoutText
    }
}

/// Seconds until `condition` held, checked every 5 ms; nil if it still did not after `deadline`.
func secondsUntil(_ deadline: Double = 1, _ condition: () -> Bool) -> Double? {
    let start = Date()
    while true {
        if condition() { return Date().timeIntervalSince(start) }
        if Date().timeIntervalSince(start) > deadline { return nil }
        usleep(5_000)
    }
}

/// What a descriptor reads from the start, up to 64 KiB.
func readAll(_ fd: Int32) -> [UInt8]? {
    var buffer = [UInt8](repeating: 0, count: 65536)
    let n = pread(fd, &buffer, buffer.count, 0)
    return n < 0 ? nil : Array(buffer[..<n])
}

func errnoText(_ code: Int32) -> String {
    code == 0 ? "ok" : String(cString: strerror(code))
}
