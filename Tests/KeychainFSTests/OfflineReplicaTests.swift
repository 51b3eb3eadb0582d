import Foundation
import Glibc
@testable import KeychainFS
import Testing
@testable import VaultCore

/// A team vault's offline replica, against a real PostgreSQL server that the tests stop,
/// start and restore from an older dump: reads, listings, attributes, `find` and the Secret
/// Service go on from the replica with the server stopped, changes are refused with EROFS
/// (exit status 17), `status` says so, the mount is live again once the server is back; a
/// replica edited on disk is refused, and a server set back to an older dump is noticed.
@Suite(.serialized, .tags(.mount, .postgres, .slow)) struct OfflineReplicaTests {
    /// Short bounds, so that an unreachable server is found out in seconds.
    static func boundedURI(_ uri: String) -> String { uri + "&keychainfs_timeout=3&connect_timeout=2" }

    /// A vault in a new database of `server`, its replica removed when the test ends.
    final class Vault {
        let server: PostgresServer
        let database: String
        let cli: CLIFixture
        let replica: String

        init(_ server: PostgresServer, database: String) throws {
            self.server = server
            self.database = database
            let uri = OfflineReplicaTests.boundedURI(try server.createDatabase(database))
            replica = OfflineReplicas.path(of: VaultLocation.displayName(uri))
            cli = try CLIFixture(vault: uri)
        }

        deinit { removeReplica() }

        func removeReplica() {
            for suffix in ["", "-wal", "-shm"] { unlink(replica + suffix) }
        }

        /// The generation the server's row holds (nil when it cannot be asked).
        var serverGeneration: Int64? {
            (try? server.sql(database, "SELECT generation FROM vaults")).flatMap { Int64($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        }

        /// The generation the replica's row holds (nil when there is none).
        var replicaGeneration: Int64? {
            guard FileManager.default.fileExists(atPath: replica),
                  let read = try? run("/usr/bin/sqlite3", ["-readonly", replica, "SELECT generation FROM vault"]), read.status == 0 else { return nil }
            return Int64(read.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines))
        }

        /// Waits until the replica is at the server's generation.
        func replicaCaughtUp(within seconds: Double = 10) -> Bool {
            eventually(within: seconds) { serverGeneration != nil && serverGeneration == replicaGeneration }
        }

        /// Waits until the mount's access log batch naming `item` is committed: a batch raises the
        /// vault's generation, so a generation read before it may be passed by the log's flush.
        func logged(_ item: String, within seconds: Double = 10) -> Bool {
            eventually(within: seconds) {
                guard let shown = try? cli.cli(["log", "--json", "--item", item]), shown.exitStatus == .success,
                      let entries = try? JSONSerialization.jsonObject(with: shown.stdout) as? [Any] else { return false }
                return !entries.isEmpty
            }
        }
    }

    /// `keychainfs status --json MOUNTPOINT`, as a dictionary.
    static func status(_ mountpoint: String) -> [String: Any]? {
        guard let result = try? run(keychainfsBinary, ["status", "--json", mountpoint]), result.status == 0,
              let object = try? JSONSerialization.jsonObject(with: Data(result.stdoutText.utf8)) else { return nil }
        return object as? [String: Any]
    }

    static func errnoOf(_ call: () -> Int32) -> Int32 { call() == 0 ? 0 : errno }

    /// Python's `os` on an extended attribute of `path` (`p`): what `statement` prints, or `errno N`.
    static func xattr(_ statement: String, _ path: String) throws -> String {
        try run("/usr/bin/python3", ["-c", "import os, sys\np = sys.argv[1]\ntry:\n    \(statement)\nexcept OSError as e:\n    print('errno %d' % e.errno, end='')",
                                     path]).stdoutText
    }

    @Test func readsAndTheSecretServiceGoOnWithTheServerStoppedChangesAreRefusedAndTheMountIsLiveAgain() throws {
        let server = try PostgresServer()
        let vault = try Vault(server, database: "offline")
        let bus = try PrivateSessionBus()
        defer { bus.stop() }
        let mountpoint = vault.cli.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let logFile = vault.cli.directory + "/daemon.stderr"
        let daemon = try ForegroundDaemon(vault.cli, mountpoint: mountpoint, extra: ["--secret-service"], standardError: logFile,
                                          environment: bus.environment)
        func log() -> String { procText(logFile) }

        // Written by the command line (so this mount's kernel caches hold none of it: its reads
        // below reach the daemon), which the mount's replica takes from the server's notice; and
        // one written through the mount, which its own commit brings to the replica.
        let large = String(repeating: "0123456789abcdef", count: 1_250)
        #expect(try vault.cli.cli(["set", "login/github", "gh-token", "--attr", "service=github"]).exitStatus == .success)
        #expect(try vault.cli.cli(["set", "large", large]).exitStatus == .success)
        #expect(writeFile(mountpoint + "/note", Array("a note".utf8)) == 0)
        #expect(vault.replicaCaughtUp(), "server \(String(describing: vault.serverGeneration)), replica \(String(describing: vault.replicaGeneration))")
        var info = stat()
        #expect(stat(vault.replica, &info) == 0 && info.st_mode & 0o777 == 0o600, "replica mode \(String(info.st_mode & 0o777, radix: 8))")
        #expect(stat(OfflineReplicas.directory, &info) == 0 && info.st_mode & 0o777 == 0o700)
        // Ciphertext only: no name or content is in the file in clear.
        let bytes = (try? Data(contentsOf: URL(fileURLWithPath: vault.replica))) ?? Data()
        for clear in ["gh-token", "github", "a note", "login"] {
            #expect(bytes.range(of: Data(clear.utf8)) == nil, "\(clear) in the replica")
        }

        server.stop()
        let stopped = Int64(time(nil))
        // Names this mount never looked up, so the kernel asks the daemon, which asks the replica.
        let started = Date()
        #expect(readFile(mountpoint + "/login/github") == Array("gh-token".utf8))
        let firstRead = Date().timeIntervalSince(started)
        #expect(firstRead < 8, "the first read offline took \(firstRead) s")
        #expect(readFile(mountpoint + "/note") == Array("a note".utf8))
        #expect(readFile(mountpoint + "/large") == Array(large.utf8))
        #expect(Set((try? FileManager.default.contentsOfDirectory(atPath: mountpoint)) ?? []) == ["login", "note", "large"])
        #expect(stat(mountpoint + "/large", &info) == 0 && info.st_size == large.utf8.count)
        #expect(try OfflineReplicaTests.xattr("print(os.getxattr(p, 'user.service').decode(), end='')", mountpoint + "/login/github") == "github")
        // The Secret Service beside the mount searches and reads from the replica too.
        let looked = try run("/usr/bin/secret-tool", ["lookup", "service", "github"], environment: bus.environment)
        #expect(looked.status == 0 && looked.stdoutText == "gh-token", "secret-tool: \(looked.status) \(looked.stderr)")

        // Every change is refused with EROFS, and nothing of it appears.
        #expect(writeFile(mountpoint + "/new", Array("x".utf8)) == EROFS)
        #expect(OfflineReplicaTests.errnoOf { mkdir(mountpoint + "/newdir", 0o700) } == EROFS)
        #expect(OfflineReplicaTests.errnoOf { unlink(mountpoint + "/note") } == EROFS)
        #expect(OfflineReplicaTests.errnoOf { rename(mountpoint + "/note", mountpoint + "/renamed") } == EROFS)
        #expect(try OfflineReplicaTests.xattr("os.setxattr(p, 'user.x', b'y')", mountpoint + "/note") == "errno \(EROFS)")
        #expect(writeFile(mountpoint + "/note", Array("changed".utf8)) == EROFS)
        // Refused at the open for writing, as on a read-only filesystem; an open for reading works.
        #expect(open(mountpoint + "/note", O_WRONLY | O_CLOEXEC) == -1 && errno == EROFS)
        let reader = open(mountpoint + "/note", O_RDONLY | O_CLOEXEC)
        #expect(reader >= 0)
        close(reader)
        #expect(readFile(mountpoint + "/note") == Array("a note".utf8))
        let stored = try run("/usr/bin/secret-tool", ["store", "--label", "x", "service", "other"], stdin: Data("v".utf8),
                             environment: bus.environment)
        #expect(stored.status != 0, "secret-tool store offline: \(stored.stdoutText)")

        // The command line, opening the vault itself, reads and finds from the replica; a change is exit status 17.
        let offlineGet = try vault.cli.cli(["get", "login/github"])
        #expect(offlineGet.exitStatus == .success && offlineGet.stdoutText == "gh-token", "get: \(offlineGet.status) \(offlineGet.stderr)")
        let found = try vault.cli.cli(["find", "service=github"])
        #expect(found.exitStatus == .success && found.stdoutText.contains("login/github"), "find: \(found.status) \(found.stderr)")
        let refused = try vault.cli.cli(["set", "cli-item", "v"])
        #expect(refused.exitStatus == .offline, "set: \(refused.status) \(refused.stderr)")
        #expect(refused.stderr.contains("offline"), "\(refused.stderr)")
        // The access log is the server's: offline it is said to be out of reach, not shown empty.
        let logged = try vault.cli.cli(["log"])
        #expect(logged.exitStatus == .storage && logged.stderr.contains("access log is kept on the server only"), "log: \(logged.status) \(logged.stderr)")
        // Without the replica the server's absence is the error it always was.
        let noReplica = try vault.cli.cli(["get", "--no-offline", "login/github"])
        #expect(noReplica.exitStatus == .storage, "get --no-offline: \(noReplica.status) \(noReplica.stderr)")

        // status: offline since when, and how old the replica is.
        let offline = OfflineReplicaTests.status(mountpoint)
        let since = (offline?["offline_since"] as? NSNumber)?.int64Value
        #expect(since != nil && since! >= stopped - 1 && since! <= Int64(time(nil)), "\(String(describing: offline))")
        #expect((offline?["replica_copied_at"] as? NSNumber) != nil)
        let text = try run(keychainfsBinary, ["status", mountpoint]).stdoutText
        #expect(text.contains("server:    offline since ") && text.contains("the replica is "), "\(text)")
        #expect(eventually { log().contains("offline: the server cannot be reached") }, "\(log())")

        // Back without a remount: status says live, and changes go to the server again.
        try server.restart()
        let restarted = Date()
        #expect(eventually(within: 20) { OfflineReplicaTests.status(mountpoint)?["offline_since"] is NSNull })
        print("OfflineReplicaTests: first read offline \(String(format: "%.3f", firstRead)) s; live again "
              + "\(String(format: "%.2f", Date().timeIntervalSince(restarted))) s after the restart began")
        #expect(eventually(within: 10) { writeFile(mountpoint + "/after", Array("back".utf8)) == 0 })
        #expect(try vault.cli.cli(["get", "--no-offline", "after"]).stdoutText == "back")
        let storedAgain = try run("/usr/bin/secret-tool", ["store", "--label", "x", "service", "other"], stdin: Data("v".utf8),
                                  environment: bus.environment)
        #expect(storedAgain.status == 0, "secret-tool store once live: \(storedAgain.stderr)")
        #expect(try run(keychainfsBinary, ["status", mountpoint]).stdoutText.contains("server:    live"))
        #expect(eventually { log().contains("live again") }, "\(log())")
        #expect(vault.replicaCaughtUp())
        withExtendedLifetime(daemon) {}
    }

    @Test func aReplicaEditedOnDiskIsRefusedNotServed() throws {
        let server = try PostgresServer()
        let vault = try Vault(server, database: "tamper")
        #expect(try vault.cli.cli(["set", "app/token", "the token"]).exitStatus == .success)
        #expect(try vault.cli.cli(["set", "app/other", "another"]).exitStatus == .success)
        #expect(vault.replicaCaughtUp())
        server.stop()
        #expect(try vault.cli.cli(["get", "app/token"]).stdoutText == "the token")

        // One byte of one item's sealed content flipped in the replica.
        let rows = try SQLiteRawRows(vault.replica)
        let contents = try rows.blobs("nodes", "content", key: "id", where: "content IS NOT NULL")
        #expect(contents.count == 2)
        let (id, sealed) = try #require(contents.first.flatMap { row in row.1.map { (row.0, $0) } })
        var flipped = sealed
        flipped[flipped.count / 2] ^= 0x01
        try rows.setBlob("nodes", "content", where: "id = \(id)", flipped)
        let listed = try vault.cli.cli(["ls", "app"])
        #expect(listed.exitStatus == .success, "ls: \(listed.stderr)")
        let reads = try ["app/token", "app/other"].map { try vault.cli.cli(["get", $0]) }
        #expect(reads.filter { $0.exitStatus == .integrityFailure }.count == 1,
                "\(reads.map { "\($0.status) \($0.stdoutText) \($0.stderr)" })")
        #expect(reads.allSatisfy { $0.exitStatus != .success || $0.stdoutText == "the token" || $0.stdoutText == "another" })

        // A mount opened offline refuses it the same way (EIO), and serves the other.
        let mountpoint = vault.cli.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let daemon = try ForegroundDaemon(vault.cli, mountpoint: mountpoint)
        let mounted = ["token", "other"].map { readFile(mountpoint + "/app/" + $0) }
        #expect(mounted.filter { $0 == nil }.count == 1 && mounted.contains { $0 != nil }, "\(mounted)")
        withExtendedLifetime(daemon) {}

        // The replica's generation raised by hand: its state no longer authenticates.
        try rows.setBlob("nodes", "content", where: "id = \(id)", sealed)
        try rows.updateVaultRow(set: "generation = generation + 5")
        let raised = try vault.cli.cli(["get", "app/other"])
        #expect(raised.exitStatus == .integrityFailure, "get: \(raised.status) \(raised.stderr)")
    }

    @Test func aServerRestoredFromAnOlderDumpIsNoticedAndNotServed() throws {
        let server = try PostgresServer()
        let vault = try Vault(server, database: "restored")
        let mountpoint = vault.cli.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let logFile = vault.cli.directory + "/daemon.stderr"
        let daemon = try ForegroundDaemon(vault.cli, mountpoint: mountpoint, standardError: logFile)
        #expect(writeFile(mountpoint + "/token", Array("old".utf8)) == 0)
        #expect(vault.logged("token") && vault.replicaCaughtUp())
        let dump = try server.dump(vault.database)
        let older = try #require(vault.serverGeneration)
        #expect(writeFile(mountpoint + "/token", Array("new".utf8)) == 0)
        #expect(writeFile(mountpoint + "/later", Array("later".utf8)) == 0)
        #expect(vault.logged("later") && vault.replicaCaughtUp())
        let newest = try #require(vault.replicaGeneration)
        #expect(newest > older)

        // The database put back as the dump has it, in one transaction, under the running mount.
        try server.sql("postgres", "DROP DATABASE \(vault.database) WITH (FORCE)")
        try server.sql("postgres", "CREATE DATABASE \(vault.database)")
        let restored = try run(PostgresServer.binaries + "/psql", ["-X", "-q", "-v", "ON_ERROR_STOP=1", "--single-transaction",
                                                                   "-h", server.socketDirectory, "-p", String(server.port), "-U", "postgres",
                                                                   "-d", vault.database], stdin: Data(dump.utf8))
        #expect(restored.status == 0, "psql restore: \(restored.stderr)")
        #expect(vault.serverGeneration == older)

        // The mount notices: status names both generations, the log says it once.
        #expect(eventually(within: 20) { (OfflineReplicaTests.status(mountpoint)?["server_generation"] as? NSNumber)?.int64Value == older },
                "\(String(describing: OfflineReplicaTests.status(mountpoint))) \(procText(logFile))")
        #expect((OfflineReplicaTests.status(mountpoint)?["replica_generation"] as? NSNumber)?.int64Value == newest)
        #expect(procText(logFile).contains("older than generation \(newest) in this machine's replica"), "\(procText(logFile))")
        // What the mount serves is the newer vault this machine had, never the dump's.
        #expect(readFile(mountpoint + "/token") == Array("new".utf8))
        #expect(readFile(mountpoint + "/later") == Array("later".utf8))
        #expect(writeFile(mountpoint + "/token", Array("onto the dump".utf8)) == ESTALE)
        #expect(try server.sql(vault.database, "SELECT generation FROM vaults").trimmingCharacters(in: .whitespacesAndNewlines) == String(older))
        // The command line refuses it as well (exit status 15), until accepted.
        let refused = try vault.cli.cli(["get", "token"])
        #expect(refused.exitStatus == .rolledBack, "get: \(refused.status) \(refused.stderr)")
        withExtendedLifetime(daemon) {}
    }

    /// What a mount wrote up to its end (a burst of changes, SIGTERM right behind it) is in the
    /// replica, at the generation the unmount records as seen: a command opens it offline.
    @Test func whatAnUnmountedMountWroteOpensOffline() throws {
        let server = try PostgresServer()
        let vault = try Vault(server, database: "unmounted")
        let mountpoint = vault.cli.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let daemon = try ForegroundDaemon(vault.cli, mountpoint: mountpoint)
        #expect(writeFile(mountpoint + "/item0", Array("value 0".utf8)) == 0)
        #expect(vault.replicaCaughtUp())
        // A burst (its copy waits out the keeper's quarter second), the end right behind it.
        for index in 1..<5 { #expect(writeFile(mountpoint + "/item\(index)", Array("value \(index)".utf8)) == 0) }
        daemon.process.terminate()
        #expect(daemon.exitStatus() == 0)
        #expect(vault.serverGeneration == vault.replicaGeneration)
        server.stop()
        let read = try vault.cli.cli(["get", "item4"])
        #expect(read.exitStatus == .success && read.stdoutText == "value 4", "get: \(read.status) \(read.stderr)")
        let listed = try vault.cli.cli(["ls"])
        #expect(listed.stdoutText.split(separator: "\n").count == 5, "\(listed.stdoutText) \(listed.stderr)")
    }

    /// Bob's machine cannot reach the server (his role may not connect) while the owner removes
    /// him: he goes on reading his replica, what he could read before; once he can connect,
    /// the copy takes the rotated records and his mount locks, and the change made after his
    /// removal never reaches him.
    @Test func aMemberRemovedWhileOfflineReadsTheReplicaUntilReconnectedAndIsThenShutOut() throws {
        let server = try PostgresServer()
        let owner = try Vault(server, database: "members")
        try server.sql("members", """
            CREATE ROLE bob LOGIN; GRANT ALL ON ALL TABLES IN SCHEMA public TO bob;
            REVOKE CONNECT ON DATABASE members FROM PUBLIC; GRANT CONNECT ON DATABASE members TO bob;
            """)
        let bobURI = owner.cli.vault.replacingOccurrences(of: "user=postgres", with: "user=bob")
        let bob = try CLIFixture(create: false, passphrase: "bob's own passphrase", vault: bobURI)
        let bobReplica = OfflineReplicas.path(of: VaultLocation.displayName(bobURI))
        defer { for suffix in ["", "-wal", "-shm"] { unlink(bobReplica + suffix) } }
        let key = bob.directory + "/bob.key"
        let made = try run(keychainfsBinary, ["member", "init", "--member-key", key, "--kdf", "interactive", "--passphrase-file", bob.passphraseFile])
        let publicKey = try #require(made.stdoutText.split(separator: "\n").last.map(String.init))
        func member(_ arguments: [String]) throws -> RunResult {
            try run(keychainfsBinary, ["member", arguments[0], "--vault", owner.cli.vault, "--passphrase-file", owner.cli.passphraseFile]
                + arguments.dropFirst())
        }
        let added = try member(["add", publicKey, "--name", "bob"])
        #expect(added.exitStatus == .success, "member add: \(added.stderr)")
        #expect(try owner.cli.cli(["set", "shared", "before"]).exitStatus == .success)
        let mountpoint = bob.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let logFile = bob.directory + "/daemon.stderr"
        let daemon = try ForegroundDaemon(bob, mountpoint: mountpoint, extra: ["--member-key", key], standardError: logFile)
        #expect(readFile(mountpoint + "/shared") == Array("before".utf8))
        func bobsGeneration() -> Int64? {
            guard let read = try? run("/usr/bin/sqlite3", ["-readonly", bobReplica, "SELECT generation FROM vault"]), read.status == 0 else { return nil }
            return Int64(read.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        #expect(eventually { bobsGeneration() != nil && bobsGeneration() == owner.serverGeneration })

        // Bob's machine is cut off; the owner removes him and changes the item.
        try server.sql("members", "REVOKE CONNECT ON DATABASE members FROM bob; "
                       + "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'bob'")
        #expect(eventually(within: 20) { OfflineReplicaTests.status(mountpoint)?["offline_since"] is NSNumber },
                "\(String(describing: OfflineReplicaTests.status(mountpoint))) \(procText(logFile))")
        let removed = try member(["remove", "bob"])
        #expect(removed.exitStatus == .success, "member remove: \(removed.stderr)")
        #expect(try owner.cli.cli(["set", "shared", "after the removal"]).exitStatus == .success)
        // Offline, bob reads what he could read before, from his replica.
        let offlineRead = try bob.cli(["get", "--member-key", key, "shared"])
        #expect(offlineRead.stdoutText == "before")
        // The team log is on the server: the read is done, and said to be unrecorded.
        #expect(offlineRead.exitStatus == .success && offlineRead.stderr.contains("not recorded in the team log"), "\(offlineRead.stderr)")
        #expect(readFile(mountpoint + "/shared") == Array("before".utf8))

        // Back on the network: the rotation reaches his mount, which locks.
        try server.sql("members", "GRANT CONNECT ON DATABASE members TO bob")
        #expect(eventually(within: 20) { OfflineReplicaTests.status(mountpoint)?["locked"] as? Bool == true },
                "\(String(describing: OfflineReplicaTests.status(mountpoint))) \(procText(logFile))")
        #expect(readFile(mountpoint + "/shared") == nil && errno == EACCES)
        #expect(eventually { bobsGeneration() == owner.serverGeneration })
        // His replica now holds only records under the new key: opened offline, it lets him in nowhere.
        try server.sql("members", "REVOKE CONNECT ON DATABASE members FROM bob; "
                       + "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'bob'")
        let shutOut = try bob.cli(["get", "--member-key", key, "shared"])
        #expect(shutOut.exitStatus == .wrongPassphrase && !shutOut.stdoutText.contains("after"), "get: \(shutOut.status) \(shutOut.stderr)")
        withExtendedLifetime(daemon) {}
    }

    @Test func noOfflineKeepsNoReplica() throws {
        let server = try PostgresServer()
        let vault = try Vault(server, database: "none")
        // The fixture's `init` kept one; from here on nothing may.
        vault.removeReplica()
        #expect(try vault.cli.cli(["set", "--no-offline", "a", "b"]).exitStatus == .success)
        #expect(!FileManager.default.fileExists(atPath: vault.replica))
        let mountpoint = vault.cli.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let daemon = try ForegroundDaemon(vault.cli, mountpoint: mountpoint, extra: ["--no-offline"])
        #expect(writeFile(mountpoint + "/c", Array("d".utf8)) == 0)
        #expect(readFile(mountpoint + "/a") == Array("b".utf8))
        #expect(!FileManager.default.fileExists(atPath: vault.replica))
        server.stop()
        // As before the replica: the server's absence is EIO, and status says nothing of a replica.
        var info = stat()
        #expect(OfflineReplicaTests.errnoOf { stat(mountpoint + "/never-seen", &info) } == EIO)
        #expect(!(try run(keychainfsBinary, ["status", mountpoint]).stdoutText.contains("server:")))
        withExtendedLifetime(daemon) {}
    }

    @Test func mountOptionNoOfflineIsTheFlag() throws {
        let translated = try MountHelperArguments.translate(["postgresql:///team#v", "/mnt", "-o", "no_offline"], subcommands: [])
        #expect(translated?.contains("--no-offline") == true)
    }
}
