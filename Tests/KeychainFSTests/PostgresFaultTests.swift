import Foundation
import Glibc
@testable import StoragePostgres
import Synchronization
import Testing
@testable import VaultCore

/// PostgreSQL stopped, restarted or silent under a mount and the command line: calls fail with
/// EIO within a bound, nothing acknowledged is lost, and the mount recovers by itself. Without
/// an offline replica (`--no-offline`): with one, reads go on and changes are EROFS
/// (OfflineReplicaTests).
@Suite(.serialized, .tags(.mount, .postgres, .slow)) struct PostgresFaultTests {
    /// Short bounds, so that the tests wait seconds, not the defaults' tens of seconds.
    static let timeout = 3
    static func boundedURI(_ uri: String) -> String { uri + "&keychainfs_timeout=\(timeout)&connect_timeout=2" }

    /// `stat` of a name never seen (so the kernel asks the daemon): its errno and how long it took.
    static func timedLookup(_ path: String) -> (errno: Int32, seconds: Double) {
        let start = Date()
        var status = stat()
        let code = stat(path, &status) == 0 ? 0 : errno
        return (code, Date().timeIntervalSince(start))
    }

    /// A new vault in a new database of `server`, mounted by a foreground daemon whose stderr
    /// goes to `logFile`.
    static func mounted(_ server: PostgresServer, database: String) throws
        -> (vault: CLIFixture, mountpoint: String, logFile: String, daemon: ForegroundDaemon) {
        let vault = try CLIFixture(vault: boundedURI(try server.createDatabase(database)))
        let mountpoint = vault.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let logFile = vault.directory + "/daemon.stderr"
        return (vault, mountpoint, logFile, try ForegroundDaemon(vault, mountpoint: mountpoint, extra: ["--no-offline"],
                                                                standardError: logFile))
    }

    static func timed<T>(_ body: () throws -> T) rethrows -> (T, Double) {
        let start = Date()
        let value = try body()
        return (value, Date().timeIntervalSince(start))
    }

    @Test func aServerStoppedAndStartedMidWriteLosesNothingAcknowledgedAndTheMountRecovers() throws {
        let server = try PostgresServer()
        let (vault, mountpoint, logFile, daemon) = try PostgresFaultTests.mounted(server, database: "faults")
        func log() -> String { procText(logFile) }

        // A descriptor that wrote before the server went: its close must report the loss.
        let held = open(mountpoint + "/held", O_CREAT | O_WRONLY, 0o600)
        #expect(held >= 0)
        let writer = ItemWriter(into: mountpoint)
        #expect(eventually(within: 30) { writer.acknowledged.count >= 5 })
        server.stop()
        #expect(write(held, "written", 7) == 7)
        let heldClose = close(held) == 0 ? 0 : errno
        #expect(heldClose == EIO)

        let lookup = PostgresFaultTests.timedLookup(mountpoint + "/never-\(UUID())")
        #expect(lookup.errno == EIO)
        #expect(lookup.seconds < Double(PostgresFaultTests.timeout + 2), "a lookup took \(lookup.seconds) s")
        // The writer's calls fail too, and the mount answers whoever lists or reads it.
        let failedBefore = writer.failures.count
        #expect(eventually(within: 20) { writer.failures.count > failedBefore })
        #expect(writer.failures.allSatisfy { $0 == EIO }, "\(Set(writer.failures))")
        let (listing, listingSeconds) = try PostgresFaultTests.timed { try run("/bin/ls", [mountpoint]) }
        #expect(listingSeconds < 15, "ls took \(listingSeconds) s (status \(listing.status))")
        let someItem = writer.acknowledged.keys.sorted().first ?? "held"
        let (reading, readingSeconds) = try PostgresFaultTests.timed { try run("/bin/cat", [mountpoint + "/" + someItem]) }
        #expect(readingSeconds < 15, "cat took \(readingSeconds) s (status \(reading.status))")
        #expect(eventually { log().contains("\(mountpoint): lost the vault's storage (lost the connection to PostgreSQL at") }, "\(log())")

        let restarted = Date()
        try server.restart()
        // Without a remount: the writer's items are acknowledged again.
        let acknowledgedAtRestart = writer.acknowledged.count
        #expect(eventually(within: 30) { writer.acknowledged.count > acknowledgedAtRestart + 2 })
        print("PostgresFaultTests: lookup failed after \(lookup.seconds) s; writes acknowledged again \(Date().timeIntervalSince(restarted)) s after the restart began")
        #expect(writer.stop())
        #expect(eventually { log().contains("\(mountpoint): the vault's storage is reachable again") }, "\(log())")
        #expect(log().components(separatedBy: "lost the vault's storage").count == 2, "\(log())")

        let acknowledged = writer.acknowledged
        #expect(acknowledged.count > 5)
        for (name, content) in acknowledged {
            #expect(readFile(mountpoint + "/" + name) == Array(content.utf8), "\(name)")
        }
        // And from the server itself, through a connection of its own.
        let names = try vault.cli(["ls"]).stdoutText.split(separator: "\n").map(String.init)
        #expect(Set(acknowledged.keys).isSubset(of: Set(names)))
        if let last = acknowledged.keys.max(by: { $0.count == $1.count ? $0 < $1 : $0.count < $1.count }) {
            #expect(try vault.cli(["get", last]).stdoutText == acknowledged[last])
        }
        withExtendedLifetime(daemon) {}
    }

    @Test func aServerThatStopsAnsweringFailsACallWithinTheTimeout() throws {
        let server = try PostgresServer()
        let (vault, mountpoint, logFile, daemon) = try PostgresFaultTests.mounted(server, database: "silent")
        #expect(ItemWriter.writeItem(mountpoint + "/before", "before") == nil)
        let held = open(mountpoint + "/held", O_CREAT | O_WRONLY, 0o600)
        #expect(held >= 0)

        server.suspend()
        defer { server.resume() }
        // The store at close waits for the server up to the timeout, then is reported failed.
        #expect(write(held, "written", 7) == 7)
        let (closed, closeSeconds) = PostgresFaultTests.timed { close(held) == 0 ? 0 : errno }
        #expect(closed == EIO)
        #expect(closeSeconds >= Double(PostgresFaultTests.timeout) - 0.5 && closeSeconds < Double(PostgresFaultTests.timeout + 3),
                "the close took \(closeSeconds) s")
        #expect(eventually { procText(logFile).contains("did not answer within \(PostgresFaultTests.timeout) s") }, "\(procText(logFile))")
        // The next call tries a new connection, bounded by connect_timeout (2 s here).
        let lookup = PostgresFaultTests.timedLookup(mountpoint + "/never-\(UUID())")
        #expect(lookup.errno == EIO)
        #expect(lookup.seconds < Double(PostgresFaultTests.timeout + 3), "a lookup took \(lookup.seconds) s")
        // A new connection to a silent server is bounded by connect_timeout.
        let (listing, listingSeconds) = try PostgresFaultTests.timed { try vault.cli(["ls", "--no-offline"]) }
        #expect(listing.exitStatus == .storage, "\(listing.stderr)")
        #expect(listingSeconds < 10, "the command took \(listingSeconds) s")

        server.resume()
        let resumed = Date()
        #expect(eventually(within: 30) { ItemWriter.writeItem(mountpoint + "/after", "after") == nil })
        print("PostgresFaultTests: a silent server failed a close after \(closeSeconds) s, a lookup after \(lookup.seconds) s, the CLI after \(listingSeconds) s; writes worked again \(Date().timeIntervalSince(resumed)) s after SIGCONT")
        #expect(readFile(mountpoint + "/before") == Array("before".utf8))
        #expect(readFile(mountpoint + "/after") == Array("after".utf8))
        withExtendedLifetime(daemon) {}
    }

    @Test func aCommandAgainstAStoppedServerFailsWithOneLine() throws {
        let server = try PostgresServer()
        let uri = try server.createDatabase("stopped")
        let vault = try CLIFixture(vault: uri.replacingOccurrences(of: "postgresql:///", with: "postgresql://postgres:hunter2-canary@/"))
        #expect(try vault.cli(["set", "kept", "value"]).exitStatus == .success)
        server.stop()
        let (result, seconds) = try PostgresFaultTests.timed { try vault.cli(["get", "--no-offline", "kept"]) }
        #expect(result.exitStatus == .storage)
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.count == 1, "\(result.stderr)")
        #expect(result.stderr.contains("cannot connect to PostgreSQL at postgresql://postgres@/stopped?host=\(server.socketDirectory)&user=postgres#default: "),
                "\(result.stderr)")
        #expect(!result.stderr.contains("hunter2"))
        #expect(seconds < 10)
    }

    /// A COMMIT the server takes longer to answer than the timeout may still commit after the
    /// client gave up: such a change is reported as failed, and says its outcome is unknown.
    @Test func aCommitWhoseOutcomeIsUnknownIsReportedAsFailed() throws {
        let server = try PostgresServer()
        let vault = try CLIFixture(vault: PostgresFaultTests.boundedURI(try server.createDatabase("unknown")))
        // A deferred trigger runs at COMMIT: the server holds the commit past the timeout.
        try server.sql("unknown", """
            CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(\(PostgresFaultTests.timeout + 2)); RETURN NULL; END $$;
            CREATE CONSTRAINT TRIGGER slow_commit AFTER UPDATE ON vaults DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit();
            """)
        let (result, seconds) = try PostgresFaultTests.timed { try vault.cli(["set", "maybe", "value"]) }
        #expect(result.exitStatus == .storage, "\(result.stderr)")
        #expect(result.stderr.contains("did not answer within \(PostgresFaultTests.timeout) s; whether the last change was committed is unknown"),
                "\(result.stderr)")
        #expect(seconds < Double(PostgresFaultTests.timeout + 10))
        try server.sql("unknown", "DROP TRIGGER slow_commit ON vaults")
        // Which is why it was not acknowledged: here the server went on and committed it.
        #expect(eventually(within: 20) { (try? vault.cli(["get", "maybe"]).stdoutText) == "value" })
    }

    @Test func theTimeoutParameterIsCheckedAndNotPassedToLibpq() throws {
        for bad in ["0", "-1", "ten", "3601"] {
            let result = try run(keychainfsBinary, ["ls", "--vault", "postgresql:///nodb?host=/nonexistent&keychainfs_timeout=\(bad)",
                                                    "--passphrase-file", "/dev/null"])
            #expect(result.exitStatus == .invalidInput, "\(bad): \(result.stderr)")
            #expect(result.stderr.contains("keychainfs_timeout in a PostgreSQL URI is a number of seconds from 1 to 3600"), "\(result.stderr)")
        }
        // Taken out before libpq, which would refuse a parameter it does not know.
        let result = try run(keychainfsBinary, ["ls", "--vault", "postgresql:///nodb?keychainfs_timeout=5&host=/nonexistent",
                                                "--passphrase-file", "/dev/null"])
        #expect(result.exitStatus == .storage)
        #expect(!result.stderr.contains("invalid URI query parameter"), "\(result.stderr)")
        #expect(result.stderr.contains("/nonexistent"), "\(result.stderr)")
    }

    /// Durability is the commit's: a session whose server (or database, or role) turned
    /// synchronous_commit off is turned back on.
    @Test func sessionsCommitDurablyWhateverTheServerSays() throws {
        let server = try PostgresServer(.init(settings: ["synchronous_commit=off"]))
        let uri = try server.createDatabase("durable")
        #expect(try server.sql("durable", "SHOW synchronous_commit") == "off\n")
        let connection = try PostgresConnection(location: PostgresLocation(uri))
        guard case .text(let setting) = try connection.row("SHOW synchronous_commit")?.first else {
            Issue.record("no setting")
            return
        }
        #expect(setting == "on")
    }

    /// The change token sees what was committed while the connection was down, though the
    /// NOTIFY for it went to no connection of this vault.
    @Test func aReconnectedVaultSeesChangesItMissed() throws {
        let server = try PostgresServer()
        let fixture = try CLIFixture(vault: PostgresFaultTests.boundedURI(try server.createDatabase("missed")))
        let phrase = try String(contentsOfFile: fixture.passphraseFile, encoding: .utf8).dropLast()
        var passphrase = try SecureBuffer(capacity: phrase.utf8.count)
        try Array(phrase.utf8).withUnsafeBytes { try passphrase.append($0) }
        let vault = try Vault.open(at: fixture.vault, passphrase: passphrase)
        let events = Mutex<[StorageConnectionEvent]>([])
        vault.observeStorageConnection { event in events.withLock { $0.append(event) } }
        let before = try vault.changeStamp()

        // Reconnected, nothing changed: the same stamp. The loss shows at a later look
        // (the first may only read the server's goodbye), the return at the one after.
        try server.restart()
        #expect(eventually {
            _ = try? vault.changeStamp()
            return events.withLock { $0.count == 2 && $0.last == .restored }
        }, "\(events.withLock { $0 })")
        #expect(try vault.changeStamp() == before)

        try server.restart()
        #expect(try fixture.cli(["set", "while-away", "x"]).exitStatus == .success)
        #expect(eventually {
            _ = try? vault.changeStamp()
            return events.withLock { $0.count == 4 && $0.last == .restored }
        }, "\(events.withLock { $0 })")
        #expect(try vault.changeStamp() != before)
    }
}
