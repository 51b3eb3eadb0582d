import Foundation
import Glibc
import Testing
@testable import VaultCore

/// A team vault in PostgreSQL made by a member, three members, one removed: the master key is
/// rotated, checked against a `pg_dump`; mounts follow (a member's) or lock (the removed one's).
@Suite(.serialized, .tags(.mount, .postgres, .slow)) struct TeamRotationTests {
    private struct Member {
        let name: String
        let key: String
        let passphrase: String
        let publicKey: String

        func opened() throws -> MemberKey {
            var phrase = Array(try String(contentsOfFile: passphrase, encoding: .utf8).utf8)
            if phrase.last == 0x0A { phrase.removeLast() }
            var buffer = try SecureBuffer(capacity: phrase.count)
            let appended = phrase.withUnsafeBytes { bytes in Result<Void, VaultError> { () throws(VaultError) in try buffer.append(bytes) } }
            try appended.get()
            return try MemberKey.open(at: key, passphrase: buffer)
        }
    }

    private func makeMember(_ f: CLIFixture, _ name: String) throws -> Member {
        let key = f.directory + "/\(name).key"
        let passphrase = try f.write("pw of \(name)\n", to: "\(name).pw")
        let made = try run(keychainfsBinary, ["member", "init", "--member-key", key, "--kdf", "interactive", "--passphrase-file", passphrase])
        #expect(made.exitStatus == .success, "\(made.stderr)")
        return Member(name: name, key: key, passphrase: passphrase, publicKey: String(made.stdoutText.split(separator: "\n").last ?? ""))
    }

    private func asMember(_ f: CLIFixture, _ member: Member, _ command: [String], _ arguments: [String]) throws -> RunResult {
        try run(keychainfsBinary, command + ["--vault", f.vault, "--member-key", member.key, "--passphrase-file", member.passphrase] + arguments)
    }

    /// The rows of one table in a plain `pg_dump`, by column name (bytea as their bytes).
    private func dumpedRows(_ dump: String, table: String) -> [[String: String]] {
        let lines = dump.split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(where: { $0.hasPrefix("COPY public.\(table) (") }),
              let open = lines[start].firstIndex(of: "("), let close = lines[start].firstIndex(of: ")") else { return [] }
        let columns = lines[start][lines[start].index(after: open)..<close].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        var rows: [[String: String]] = []
        for line in lines[(start + 1)...] {
            if line == "\\." { break }
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            rows.append(Dictionary(uniqueKeysWithValues: zip(columns, fields)))
        }
        return rows
    }

    private func bytes(_ field: String?) -> [UInt8] {
        guard let field, field.hasPrefix("\\\\x") else { return [] }
        let hex = Array(field.dropFirst(3).utf8)
        return stride(from: 0, to: hex.count - 1, by: 2).map { UInt8(String(decoding: hex[$0...$0 + 1], as: UTF8.self), radix: 16)! }
    }

    @Test func removingAMemberRotatesTheKeyAndMountsFollowOrLock() throws {
        let server = try PostgresServer()
        let f = try CLIFixture(create: false, vault: try server.createDatabase("team"))
        let alice = try makeMember(f, "alice"), bob = try makeMember(f, "bob"), carol = try makeMember(f, "carol")

        // A team vault made by a member: alice's slot is its only way in.
        let made = try run(keychainfsBinary, ["init", "--vault", f.vault, "--member-key", alice.key, "--name", "alice",
                                              "--passphrase-file", alice.passphrase])
        #expect(made.exitStatus == .success, "\(made.stderr)")
        let byPassphrase = try f.cli(["get", "anything"], passphraseFile: alice.passphrase)
        #expect(byPassphrase.exitStatus == .wrongPassphrase && byPassphrase.stderr.contains("use --member"), "\(byPassphrase.stderr)")
        for member in [bob, carol] {
            let added = try asMember(f, alice, ["member", "add"], [member.publicKey, "--name", member.name])
            #expect(added.exitStatus == .success, "\(added.stderr)")
        }
        #expect(try asMember(f, carol, ["set"], ["team/before", "written before"]).exitStatus == .success)

        // Alice and carol mount it; carol keeps a copy of her key file and the master key as it is.
        var mountpoints: [String] = []
        defer { for mountpoint in mountpoints { _ = try? run(keychainfsBinary, ["unmount", mountpoint]) } }
        for member in [alice, carol] {
            let mountpoint = f.directory + "/mnt-\(member.name)"
            try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
            let mounted = try run(keychainfsBinary, ["mount", "--vault", f.vault, "--member-key", member.key,
                                                     "--passphrase-file", member.passphrase, mountpoint])
            #expect(mounted.exitStatus == .success, "\(mounted.stderr)")
            mountpoints.append(mountpoint)
        }
        let (aliceMount, carolMount) = (mountpoints[0], mountpoints[1])
        #expect(readFile(aliceMount + "/team/before") == Array("written before".utf8))
        #expect(readFile(carolMount + "/team/before") == Array("written before".utf8))
        let keptKey = f.directory + "/carol-kept.key"
        try FileManager.default.copyItem(atPath: carol.key, toPath: keptKey)
        let carolsKey = try carol.opened()
        let preRemoval = try Vault.open(at: f.vault, member: carolsKey).withStore { $0.cipher }

        // Bob removes carol.
        let removed = try asMember(f, bob, ["member", "remove"], ["carol"])
        #expect(removed.exitStatus == .success, "\(removed.stderr)")
        let said = removed.stdoutText + removed.stderr
        #expect(said.contains("rotated the master key") && said.contains("records re-encrypted") && said.contains("(alice, bob)"), "\(said)")

        // Alice's mount goes on without a remount: reads, and writes a canary under the new key.
        #expect(readFile(aliceMount + "/team/before") == Array("written before".utf8))
        #expect(writeFile(aliceMount + "/team/canary", Array("canary-after-removal".utf8)) == 0)
        #expect(readFile(aliceMount + "/team/canary") == Array("canary-after-removal".utf8))
        #expect(try asMember(f, bob, ["get"], ["team/canary"]).stdoutText == "canary-after-removal")
        // Carol's mount locks: its requests are refused as locked (EACCES), and status says so.
        #expect(try eventually { try run(keychainfsBinary, ["status", carolMount]).stdoutText.contains("state:     locked") })
        #expect(errnoOf { open(carolMount + "/team/before", O_RDONLY) } == EACCES)
        #expect(try run(keychainfsBinary, ["status", aliceMount]).stdoutText.contains("state:     unlocked"))
        // Carol, with the key file she kept, is not a member any more.
        let refused = try run(keychainfsBinary, ["get", "--vault", f.vault, "--member-key", keptKey, "--passphrase-file", carol.passphrase,
                                                 "team/before"])
        #expect(refused.exitStatus == .wrongPassphrase, "\(refused.stderr)")

        // In a dump: no member slot opens with carol's key, and the canary's content does not
        // open with the master key from before (it does with alice's current one).
        let dump = try server.dump("team")
        #expect(!dump.contains("canary-after-removal"))
        let slots = dumpedRows(dump, table: "member_slots")
        #expect(slots.count == 2)
        for slot in slots {
            let sealed = bytes(slot["sealed_master_key"])
            #expect(!sealed.isEmpty)
            let count = sealed.count - 48  // crypto_box_SEALBYTES: an ephemeral public key and a MAC
            var plain = try SecureBuffer(capacity: max(count, 1))
            #expect(!carolsKey.openSealedBox(sealed, count: count, into: &plain))
        }
        let asAlice = try Vault.open(at: f.vault, member: try alice.opened())
        let canary = try asAlice.node(at: try VaultPath("team/canary"))
        let current = try asAlice.withStore { $0.cipher }
        let row = try #require(dumpedRows(dump, table: "nodes").first { $0["id"] == String(canary.id.rawValue) })
        let place = RecordPlace(node: canary.id, incarnation: bytes(row["incarnation"]))
        let content = bytes(row["content"])
        #expect(!content.isEmpty)
        let generation = canary.attributes.contentGeneration
        for cipher in [preRemoval, current] {
            let opened = try cipher.openContent(content, place, generation: generation, expectedCount: canary.attributes.size,
                                                accessibility: canary.attributes.accessibility)
            #expect((opened != nil) == (cipher === current))
        }
    }

    /// Anyone who may write the tables can add a slot row for a key of their own (a sealed box
    /// needs only the public key): a rotation refuses to wrap the new master key to it, so the
    /// forger, listed or not, opens nothing; the vault stays as it was.
    @Test func aSlotForgedInTheDatabaseGetsNoKeyFromARotation() throws {
        let server = try PostgresServer()
        let f = try CLIFixture(create: false, vault: try server.createDatabase("team"))
        let alice = try makeMember(f, "alice"), bob = try makeMember(f, "bob"), mallory = try makeMember(f, "mallory")
        #expect(try run(keychainfsBinary, ["init", "--vault", f.vault, "--member-key", alice.key, "--name", "alice",
                                           "--passphrase-file", alice.passphrase]).exitStatus == .success)
        #expect(try asMember(f, alice, ["member", "add"], [bob.publicKey, "--name", bob.name]).exitStatus == .success)
        #expect(try asMember(f, alice, ["set"], ["team/key", "before"]).exitStatus == .success)

        let key = try #require(Data(base64Encoded: mallory.publicKey)).map { String(format: "%02x", $0) }.joined()
        try server.sql("team", "INSERT INTO member_slots VALUES ('default', 'mallory', '\\x\(key)', '\\x\(String(repeating: "00", count: 200))')")
        let removed = try asMember(f, alice, ["member", "remove"], ["bob"])
        // The slots' MAC the vault's state binds (format 8) refuses the added row before its own MAC is looked at.
        #expect(removed.exitStatus == .integrityFailure && removed.stderr.contains("member slot"), "\(removed.stderr)")
        let listed = try asMember(f, alice, ["member", "list"], [])
        #expect(listed.exitStatus == .integrityFailure && !listed.stdoutText.contains("mallory"), "\(listed.stdoutText) \(listed.stderr)")
        let asMallory = try asMember(f, mallory, ["get"], ["team/key"])
        #expect(asMallory.exitStatus != .success && !asMallory.stdoutText.contains("before"), "\(asMallory.stdoutText)")
        // The vault refuses every member while the row is there: it does not open with a slot it did not write.
        #expect(try asMember(f, bob, ["get"], ["team/key"]).exitStatus == .integrityFailure)

        // Gone from the table, the rotation goes ahead, and bob is out.
        try server.sql("team", "DELETE FROM member_slots WHERE name = 'mallory'")
        let retried = try asMember(f, alice, ["member", "remove"], ["bob"])
        #expect(retried.exitStatus == .success, "\(retried.stderr)")
        #expect(try asMember(f, bob, ["get"], ["team/key"]).exitStatus == .wrongPassphrase)
        #expect(try asMember(f, alice, ["get"], ["team/key"]).stdoutText == "before")
    }

    @Test func thisDeviceOnlyStaysOutOfAVaultWithMembers() throws {
        let f = try CLIFixture()
        let hostKey = ["KEYCHAINFS_HOST_KEY": f.directory + "/host.key"]
        let local = try run(keychainfsBinary, ["set", "--vault", f.vault, "--passphrase-file", f.passphraseFile, "--class", "this-device-only",
                                               "local", "x"], environment: hostKey)
        #expect(local.exitStatus == .success, "\(local.stderr)")
        let bob = try makeMember(f, "bob")
        let withPassphrase = ["--vault", f.vault, "--passphrase-file", f.passphraseFile]
        let refused = try run(keychainfsBinary, ["member", "add"] + withPassphrase + [bob.publicKey, "--name", "bob"])
        #expect(refused.exitStatus == .invalidInput && refused.stderr.contains("1 this-device-only item(s)"), "\(refused.stderr)")
        let changed = try run(keychainfsBinary, ["class"] + withPassphrase + ["local", "when-unlocked"], environment: hostKey)
        #expect(changed.exitStatus == .success, "\(changed.stderr)")
        let added = try run(keychainfsBinary, ["member", "add"] + withPassphrase + [bob.publicKey, "--name", "bob"])
        #expect(added.exitStatus == .success, "\(added.stderr)")
        for attempt in [["class", "local", "this-device-only"], ["class", "/", "this-device-only"],
                        ["set", "--class", "this-device-only", "other", "y"]] {
            let result = try run(keychainfsBinary, [attempt[0], "--vault", f.vault, "--passphrase-file", f.passphraseFile] + attempt.dropFirst(),
                                 environment: hostKey)
            #expect(result.exitStatus == .invalidInput && result.stderr.contains("not allowed in a vault with members"),
                    "\(attempt): \(result.stderr)")
        }
    }
}
