import Foundation
import Glibc
import Testing
import VaultCore

/// The rows a PostgreSQL vault's connection keeps between transactions (PostgresKnownRows):
/// they answer reads and start writes without a round trip while they are true, another
/// session's commit makes them asked again, and a write that started from rows no longer true
/// (its lock's check fails) runs again on what is there.
@Suite(.serialized, .tags(.postgres, .slow)) struct PostgresKnownRowsTests {
    private func opened(_ f: CLIFixture, at uri: String? = nil) throws -> Vault {
        let phrase = try String(contentsOfFile: f.passphraseFile, encoding: .utf8).dropLast()
        var passphrase = try SecureBuffer(capacity: phrase.utf8.count)
        try Array(phrase.utf8).withUnsafeBytes { try passphrase.append($0) }
        return try Vault.open(at: uri ?? f.vault, passphrase: passphrase)
    }

    private func secret(_ text: String) throws -> SecureBuffer {
        var buffer = try SecureBuffer(capacity: text.utf8.count)
        try Array(text.utf8).withUnsafeBytes { try buffer.append($0) }
        return buffer
    }

    private func text(_ vault: Vault, _ path: String) throws -> String {
        let content = try vault.read(VaultPath(path))
        return content.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    /// The database name of a CLIFixture's URI (`postgresql:///NAME?...`).
    private func database(_ f: CLIFixture) -> String {
        String(f.vault.dropFirst("postgresql:///".count).prefix { $0 != "?" })
    }

    /// Round trips on the wire, per call, on a vault opened through the counting proxy: what
    /// is known costs nothing to read and one flight to change.
    @Test func knownRowsCostNoRoundTripToReadAndOneToChange() throws {
        let server = try PostgresServer()
        let counter = try PostgresRoundTripCounter(to: server)
        let f = try CLIFixture(vault: try server.createDatabase("known"))
        let vault = try opened(f, at: f.vault.replacingOccurrences(of: "host=\(server.socketDirectory)",
                                                                   with: "host=\(counter.socketDirectory)"))
        defer { withExtendedLifetime(counter) {} }
        try vault.store(try secret("first"), at: VaultPath("deploy/key"))
        #expect(try text(vault, "deploy/key") == "first")

        func trips(_ body: () throws -> Void) throws -> Int {
            let before = counter.roundTrips
            try body()
            return counter.roundTrips - before
        }
        var got = ""
        let read = try trips { got = try text(vault, "deploy/key") }
        #expect(got == "first")
        let replaced = try trips { try vault.store(try secret("second"), at: VaultPath("deploy/key")) }
        let reread = try trips { got = try text(vault, "deploy/key") }
        #expect(got == "second")
        print("PostgresKnownRowsTests: round trips: read \(read), store over a known item \(replaced), read again \(reread)")
        #expect(read == 0)
        #expect(replaced == 1)
        #expect(reread == 0)
    }

    /// Another session's commit is heard of, and from then on nothing known answers: the next
    /// read sees the change, here without waiting for anything but the notice.
    @Test func anotherSessionsChangeIsSeenOnceHeard() throws {
        let server = try PostgresServer()
        let f = try CLIFixture(vault: try server.createDatabase("heard"))
        let here = try opened(f), there = try opened(f)
        let listener = try #require(here.changeListener())
        try here.store(try secret("k3y"), at: VaultPath("deploy/key"))
        #expect(try text(here, "deploy/key") == "k3y")  // known here now
        // Connected once it answers (nil: nothing heard within the wait).
        _ = listener.next(timeout: 0.1)

        let archive = try there.makeDictionary(at: VaultPath("archive"), withIntermediates: false)
        let deploy = try there.node(at: VaultPath("deploy"))
        try there.move(ItemName("key"), from: deploy.id, to: ItemName("key"), in: archive.id)
        let deadline = Date().addingTimeInterval(5)
        var heardMove = false
        while !heardMove, Date() < deadline {
            if case .changed(.nodes(let nodes))? = listener.next(timeout: 0.1), nodes.contains(archive.id), nodes.contains(deploy.id) {
                heardMove = true
            }
        }
        #expect(heardMove)
        #expect(throws: VaultError.self) { try text(here, "deploy/key") }
        #expect(try text(here, "archive/key") == "k3y")
    }

    /// A commit this connection has not heard of (the vault's count moved with no notice, as
    /// when a notice is still on its way): a write from known rows fails its lock's check,
    /// rolls back whole and runs again on the rows as they are, so it still succeeds.
    @Test func aWriteFromRowsNoLongerTrueRunsAgainOnWhatIsThere() throws {
        let server = try PostgresServer()
        let f = try CLIFixture(vault: try server.createDatabase("stale"))
        let here = try opened(f)
        try here.store(try secret("one"), at: VaultPath("deploy/key"))
        #expect(try text(here, "deploy/key") == "one")
        try server.sql(database(f), "UPDATE vaults SET change_count = change_count + 1")
        try here.store(try secret("two"), at: VaultPath("deploy/key"))
        #expect(try text(here, "deploy/key") == "two")
        // What the server holds, through a session that knew nothing before.
        #expect(try text(try opened(f), "deploy/key") == "two")
        let verified = try f.cli(["verify"])
        #expect(verified.exitStatus == .success, "\(verified.stderr)")
    }

    /// Two sessions writing the same item in turn, each knowing the row as it left it: every
    /// write lands on the other's (never on a row it replaced), and the vault verifies.
    @Test func sessionsWritingInTurnEachSeeTheOthersLastWrite() throws {
        let server = try PostgresServer()
        let f = try CLIFixture(vault: try server.createDatabase("turns"))
        let ann = try opened(f), bob = try opened(f)
        try ann.store(try secret("start"), at: VaultPath("shared"))
        #expect(try text(bob, "shared") == "start")
        for round in 0..<20 {
            // The writer knows the row as it last read or wrote it, which the other replaced since.
            let writer = round % 2 == 0 ? ann : bob
            try writer.store(try secret("round \(round)"), at: VaultPath("shared"))
            #expect(try text(writer, "shared") == "round \(round)")
        }
        #expect(try text(try opened(f), "shared") == "round 19")
        let verified = try f.cli(["verify"])
        #expect(verified.exitStatus == .success, "\(verified.stderr)")
    }

    /// The server gone under a write from known rows: the write fails with the connection's
    /// loss and nothing committed before is lost; once the server is back, so are the writes.
    @Test func aServerStoppedUnderAOneFlightWriteLosesNothingCommitted() throws {
        let server = try PostgresServer()
        let f = try CLIFixture(vault: PostgresFaultTests.boundedURI(try server.createDatabase("gone")))
        let here = try opened(f)
        try here.store(try secret("kept"), at: VaultPath("deploy/key"))
        #expect(try text(here, "deploy/key") == "kept")
        server.stop()
        let lost = try secret("lost")
        do throws(VaultError) {
            try here.store(lost, at: VaultPath("deploy/key"))
            Issue.record("a store with the server stopped succeeded")
        } catch .storageUnreachable(let reason) {
            #expect(reason.contains("PostgreSQL"), "\(reason)")
        } catch {
            Issue.record("a store with the server stopped failed with \(error)")
        }
        try server.restart()
        #expect(eventually(within: 10) { (try? text(here, "deploy/key")) == "kept" })
        try here.store(try secret("after"), at: VaultPath("deploy/key"))
        #expect(try text(try opened(f), "deploy/key") == "after")
    }

    /// Access rules are known with the rows: each change to them, here or in another session,
    /// is what the next look finds, and removing an item takes its rules along (the rules' MAC
    /// stays true, so the vault verifies).
    @Test func knownRulesFollowEveryChange() throws {
        let server = try PostgresServer()
        let f = try CLIFixture(vault: try server.createDatabase("rules"))
        let here = try opened(f), there = try opened(f)
        let listener = try #require(here.changeListener())
        _ = listener.next(timeout: 0.1)
        let rule = AccessRule(.unit("kcfs-known.service"), confirm: true)
        try here.store(try secret("1"), at: VaultPath("a/one"))
        try here.store(try secret("2"), at: VaultPath("a/two"))
        try here.allow(rule, at: VaultPath("a/one"))
        func governed() throws -> [String] { try here.ruleSets().map { $0.path.description } }
        #expect(try governed() == ["a/one"])

        let folder = try here.node(at: VaultPath("a"))
        _ = try here.remove(named: ItemName("one"), in: folder.id, kind: .item)
        #expect(try governed() == [])
        _ = try here.remove(named: ItemName("two"), in: folder.id, kind: .item)
        var verified = try f.cli(["verify"])
        #expect(verified.exitStatus == .success, "\(verified.stderr)")

        try there.store(try secret("3"), at: VaultPath("b/three"))
        try there.allow(rule, at: VaultPath("b/three"))
        let deadline = Date().addingTimeInterval(5)
        var heard = 0
        while heard < 2, Date() < deadline {
            if case .changed? = listener.next(timeout: 0.1) { heard += 1 }
        }
        #expect(heard >= 1)
        #expect(eventually { (try? governed()) == ["b/three"] })
        verified = try f.cli(["verify"])
        #expect(verified.exitStatus == .success, "\(verified.stderr)")
    }
}
