import Foundation
import Glibc
import Testing

/// The team log through the real thing: a PostgreSQL server of the test's own, two members
/// mounting the vault (two daemons, two member keys), `keychainfs log` and `member remove` /
/// `member rotate-list` as an admin runs them.
@Suite(.serialized, .tags(.mount, .postgres, .slow)) struct TeamLogCLITests {
    /// One entry of `log --json`, as far as these tests look.
    private struct Entry: Decodable {
        let access: String
        let path: String?
        let member: String?
        let isMember: Bool?
        let aboutMember: String?
    }

    private func log(_ team: TeamVault, _ arguments: [String] = []) throws -> [Entry] {
        let result = try team.owner.cli(["log", "--json"] + arguments)
        guard result.exitStatus == .success else { throw FixtureError("log failed: \(result.stderr)") }
        return try JSONDecoder().decode([Entry].self, from: result.stdout)
    }

    private func shows(_ team: TeamVault, _ access: String, _ path: String, by member: String) -> Bool {
        ((try? log(team)) ?? []).contains { $0.access == access && $0.path == path && $0.member == member }
    }

    @Test func eachMembersReadsAndChangesThroughTheirMountAreSignedAsThem() throws {
        let team = try TeamVault()
        #expect(writeFile(team.ann.path("prod-db"), Array("hunter2".utf8)) == 0)
        #expect(eventually { readFile(team.bob.path("prod-db")) == Array("hunter2".utf8) })
        // Each daemon commits its batch within about a second.
        #expect(eventually { shows(team, "write", "prod-db", by: "ann") && shows(team, "read", "prod-db", by: "bob") })

        let bobs = try log(team, ["--by", "bob", "--item", "prod-db"])
        #expect(!bobs.isEmpty && bobs.allSatisfy { $0.member == "bob" && $0.path == "prod-db" && $0.isMember == true })
        #expect(try log(team, ["--by", "nobody"]).isEmpty)
        // As the issue spells it, `log --member NAME`: `--member` is every command's flag to open
        // with one's member key, so NAME arrives as the path; no entry is at or below it and a
        // member signed entries, so it is that member. A path that entries are at stays a path.
        let spelled = try team.bob.fixture.cli(["log", "--json", "--member-key", team.bob.key, "--member", "bob", "--item", "prod-db"])
        #expect(spelled.exitStatus == .success, "\(spelled.stderr)")
        let bobsAsSpelled = try JSONDecoder().decode([Entry].self, from: spelled.stdout)
        #expect(bobsAsSpelled.count >= bobs.count && bobsAsSpelled.allSatisfy { $0.member == "bob" && $0.path == "prod-db" })
        let aPath = try team.bob.fixture.cli(["log", "--json", "--member-key", team.bob.key, "--member", "prod-db"])
        #expect(aPath.exitStatus == .success, "\(aPath.stderr)")
        let underPath = try JSONDecoder().decode([Entry].self, from: aPath.stdout)
        #expect(!underPath.isEmpty && underPath.allSatisfy { $0.path == "prod-db" })
        let added = try log(team).filter { $0.access == "member-add" }
        #expect(added.map(\.aboutMember) == ["ann", "bob"])

        // Text: the member follows the time.
        let text = try team.owner.cli(["log", "--by", "bob", "--item", "prod-db"])
        #expect(text.exitStatus == .success, "\(text.stderr)")
        let fields = try #require(text.stdoutText.split(separator: "\n").first).components(separatedBy: "  ")
        #expect(fields.count == 8 && fields[1] == "bob" && fields.last == "prod-db", "\(fields)")
        #expect(try team.owner.cli(["verify"]).exitStatus == .success)
    }

    /// The server's rows edited: a batch deleted from the middle, then the newest deleted
    /// (this machine saw it), each makes `log` fail with what happened, the rest still printed.
    @Test func batchesDeletedOnTheServerAreReported() throws {
        let team = try TeamVault()
        for index in 0..<3 {
            #expect(writeFile(team.ann.path("item\(index)"), Array("v\(index)".utf8)) == 0)
            #expect(eventually { shows(team, "write", "item\(index)", by: "ann") })
        }
        let sequences = try team.sql("SELECT sequence FROM access_log ORDER BY sequence").split(separator: "\n").compactMap { Int($0) }
        #expect(sequences.count >= 4)
        let middle = sequences[sequences.count / 2]
        try team.sql("DELETE FROM access_log WHERE sequence = \(middle)")
        let gap = try team.owner.cli(["log"])
        #expect(gap.exitStatus == .integrityFailure && gap.stderr.contains("were deleted"), "\(gap.stderr)")
        #expect(!gap.stdout.isEmpty)

        let newest = try #require(Int(try team.sql("SELECT max(sequence) FROM access_log").trimmingCharacters(in: .whitespacesAndNewlines)))
        try team.sql("DELETE FROM access_log WHERE sequence = \(newest)")
        let tail = try team.owner.cli(["log"])
        #expect(tail.exitStatus == .integrityFailure && tail.stderr.contains("the newest batches were deleted"), "\(tail.stderr)")
    }

    /// `member remove` lists every item with the removed member's last read; `rotate-list`
    /// says it again later, an item changed since marked as such.
    @Test func memberRemoveListsWhatToChangeAndRotateListSaysItAgain() throws {
        let team = try TeamVault()
        #expect(writeFile(team.ann.path("prod-db"), Array("db password".utf8)) == 0)
        #expect(writeFile(team.ann.path("prod-api"), Array("api token".utf8)) == 0)
        #expect(eventually { readFile(team.bob.path("prod-api")) == Array("api token".utf8) })
        #expect(eventually { shows(team, "read", "prod-api", by: "bob") })

        let removed = try run(keychainfsBinary, ["member", "remove", "--vault", team.owner.vault, "--passphrase-file",
                                                 team.owner.passphraseFile, "bob", "--json"])
        #expect(removed.exitStatus == .success, "\(removed.stderr)")
        let list = try #require(try JSONSerialization.jsonObject(with: removed.stdout) as? [String: Any])
        #expect(list["member"] as? String == "bob" && list["removed"] is String)
        let items = try #require(list["items"] as? [[String: Any]])
        #expect(items.compactMap { $0["path"] as? String } == ["prod-api", "prod-db"])
        #expect(items[0]["lastRead"] is String && items[1]["lastRead"] == nil)
        #expect(items.allSatisfy { $0["changedSinceRemoval"] as? Bool == false })

        // The owner changes the API token: later, the list says so.
        #expect(try team.owner.cli(["set", "prod-api", "new api token"]).exitStatus == .success)
        let again = try run(keychainfsBinary, ["member", "rotate-list", "--vault", team.owner.vault, "--passphrase-file",
                                               team.owner.passphraseFile, "bob"])
        #expect(again.exitStatus == .success, "\(again.stderr)")
        let lines = again.stdoutText.split(separator: "\n").map(String.init)
        #expect(lines.count == 2 && lines[0].hasPrefix("prod-api  read ") && lines[0].hasSuffix("  changed since"), "\(lines)")
        #expect(lines.last == "prod-db  never read  to change")
        #expect(again.stderr.contains("1 item(s) bob could read and that have not changed since the removal"))
        // The removal is in the log, signed by nobody (the owner used the passphrase), and bob's
        // reads stay, marked as a former member's.
        let entries = try log(team)
        #expect(entries.contains { $0.access == "member-remove" && $0.aboutMember == "bob" })
        #expect(entries.contains { $0.member == "bob" && $0.isMember == false })
    }

    /// A member's command line holding the key (no daemon) logs in the team log too.
    @Test func aMembersDirectCommandLineIsLogged() throws {
        let team = try TeamVault()
        #expect(writeFile(team.ann.path("cli-item"), Array("x".utf8)) == 0)
        #expect(try run(keychainfsBinary, ["unmount", team.bob.mountpoint]).status == 0)
        let direct = try run(keychainfsBinary, ["get", "--vault", team.owner.vault, "--member-key", team.bob.key,
                                                "--passphrase-file", team.bob.fixture.passphraseFile, "cli-item"])
        #expect(direct.exitStatus == .success && direct.stdoutText == "x", "\(direct.stderr)")
        #expect(shows(team, "read", "cli-item", by: "bob"))
    }
}
