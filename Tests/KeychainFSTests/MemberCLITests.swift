import Foundation
import Testing

/// `keychainfs member init` and `member show`.
@Suite(.tags(.slow)) struct MemberCLITests {
    @Test func initWritesTheKeyUnderXDGDataHomeAndShowPrintsItsPublicKey() throws {
        let f = try CLIFixture(create: false)
        let environment = ["XDG_DATA_HOME": f.directory + "/data"]
        let made = try run(keychainfsBinary, ["member", "init", "--kdf", "interactive", "--passphrase-file", f.passphraseFile],
                           environment: environment)
        #expect(made.exitStatus == .success, "\(made.stderr)")
        let path = f.directory + "/data/keychainfs/member.key"
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(stat(f.directory + "/data/keychainfs", &info) == 0 && info.st_mode & 0o777 == 0o700)
        let publicKey = try #require(made.stdoutText.split(separator: "\n").last.map(String.init))
        #expect(publicKey.count == 88)

        // No passphrase asked (standard input is /dev/null): the public key is stored in clear.
        let shown = try run(keychainfsBinary, ["member", "show"], environment: environment)
        #expect(shown.exitStatus == .success, "\(shown.stderr)")
        #expect(shown.stdoutText.split(separator: "\n").last.map(String.init) == publicKey)
    }

    @Test func initRefusesToOverwriteAKey() throws {
        let f = try CLIFixture(create: false)
        let path = f.directory + "/member.key"
        let first = try run(keychainfsBinary, ["member", "init", "--member-key", path, "--kdf", "interactive", "--passphrase-file", f.passphraseFile])
        #expect(first.exitStatus == .success, "\(first.stderr)")
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let second = try run(keychainfsBinary, ["member", "init", "--member-key", path, "--kdf", "interactive", "--passphrase-file", f.passphraseFile])
        #expect(second.exitStatus != .success)
        #expect(second.stderr.contains("refusing to overwrite"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
    }

    @Test func showWithoutAKeySaysHowToMakeOne() throws {
        let f = try CLIFixture(create: false)
        let shown = try run(keychainfsBinary, ["member", "show", "--member-key", f.directory + "/none.key"])
        #expect(shown.exitStatus != .success)
        #expect(shown.stderr.contains("member init"))
    }

    /// A member key of its own: a file and its passphrase file.
    private func makeMember(_ f: CLIFixture, _ name: String) throws -> (key: String, passphrase: String, publicKey: String) {
        let key = f.directory + "/\(name).key"
        let passphrase = try f.write("pw of \(name)\n", to: "\(name).pw")
        let made = try run(keychainfsBinary, ["member", "init", "--member-key", key, "--kdf", "interactive", "--passphrase-file", passphrase])
        #expect(made.exitStatus == .success, "\(made.stderr)")
        return (key, passphrase, String(made.stdoutText.split(separator: "\n").last ?? ""))
    }

    private func asMember(_ f: CLIFixture, _ member: (key: String, passphrase: String, publicKey: String), _ arguments: [String]) throws -> RunResult {
        var args = arguments
        args.insert(contentsOf: ["--vault", f.vault, "--member-key", member.key, "--passphrase-file", member.passphrase], at: arguments.first == "member" ? 2 : 1)
        return try run(keychainfsBinary, args)
    }

    /// A (added with the vault passphrase) adds B; B reads, lists; A removes B, who is then refused.
    @Test func membersAddListAndRemoveEachOther() throws {
        let f = try CLIFixture()
        try f.cli(["set", "deploy/key", "team secret"])
        let a = try makeMember(f, "alice"), b = try makeMember(f, "bob")

        let refused = try asMember(f, b, ["get", "deploy/key"])
        #expect(refused.exitStatus == .wrongPassphrase)
        #expect(refused.stderr.contains("is not a member of this vault"), "\(refused.stderr)")

        let addA = try run(keychainfsBinary, ["member", "add", "--vault", f.vault, "--passphrase-file", f.passphraseFile,
                                              a.publicKey, "--name", "alice"])
        #expect(addA.exitStatus == .success, "\(addA.stderr)")
        let addB = try asMember(f, a, ["member", "add", b.publicKey, "--name", "bob"])
        #expect(addB.exitStatus == .success, "\(addB.stderr)")
        let got = try asMember(f, b, ["get", "deploy/key"])
        #expect(got.exitStatus == .success, "\(got.stderr)")
        #expect(got.stdoutText == "team secret")

        let list = try asMember(f, b, ["member", "list"])
        #expect(list.stdoutText == "passphrase slot 1\nmember alice \(a.publicKey)\nmember bob \(b.publicKey)\n", "\(list.stderr)")
        let json = try asMember(f, a, ["member", "list", "--json"])
        let slots = try #require(try JSONSerialization.jsonObject(with: json.stdout) as? [[String: Any]])
        #expect(slots.count == 3)
        #expect(slots[0]["kind"] as? String == "passphrase" && slots[0]["slot"] as? Int == 1)
        #expect(slots[2]["kind"] as? String == "member" && slots[2]["name"] as? String == "bob" && slots[2]["publicKey"] as? String == b.publicKey)

        let wrong = try run(keychainfsBinary, ["get", "--vault", f.vault, "--member-key", b.key, "--passphrase-file", a.passphrase, "deploy/key"])
        #expect(wrong.exitStatus == .wrongPassphrase)

        let removed = try asMember(f, a, ["member", "remove", "bob"])
        #expect(removed.exitStatus == .success, "\(removed.stderr)")
        #expect(try asMember(f, b, ["get", "deploy/key"]).exitStatus == .wrongPassphrase)
        #expect(try asMember(f, a, ["get", "deploy/key"]).stdoutText == "team secret")
        let again = try asMember(f, a, ["member", "remove", "bob"])
        #expect(again.exitStatus == .notFound)
        #expect(again.stderr.contains("no member named bob"), "\(again.stderr)")
        #expect(try asMember(f, a, ["member", "add", "not-a-key", "--name", "x"]).exitStatus == .invalidInput)
    }

    /// `--member` alone takes the default member key file, as `member init` made it.
    @Test func memberAloneUsesTheDefaultKeyFile() throws {
        let f = try CLIFixture()
        try f.cli(["set", "deploy/key", "team secret"])
        let environment = ["XDG_DATA_HOME": f.directory + "/data"]
        let memberPassphrase = try f.write("pw of carol\n", to: "carol.pw")
        let made = try run(keychainfsBinary, ["member", "init", "--kdf", "interactive", "--passphrase-file", memberPassphrase],
                           environment: environment)
        let publicKey = String(made.stdoutText.split(separator: "\n").last ?? "")
        let added = try run(keychainfsBinary, ["member", "add", "--vault", f.vault, "--passphrase-file", f.passphraseFile, publicKey, "--name", "carol"])
        #expect(added.exitStatus == .success, "\(added.stderr)")
        let got = try run(keychainfsBinary, ["get", "--vault", f.vault, "--member", "--passphrase-file", memberPassphrase, "deploy/key"],
                          environment: environment)
        #expect(got.exitStatus == .success, "\(got.stderr)")
        #expect(got.stdoutText == "team secret")

        // passwd has no passphrase to change for a member: it says so before asking for either
        // (standard input is /dev/null: a prompt would fail as "not on a terminal" instead).
        let passwd = try run(keychainfsBinary, ["passwd", "--vault", f.vault, "--member"], environment: environment)
        #expect(passwd.exitStatus == .invalidInput && passwd.stderr.contains("member key"), "\(passwd.stderr)")
        #expect(try f.cli(["get", "deploy/key"]).stdoutText == "team secret")
    }
}
