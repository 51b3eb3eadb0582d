import Foundation
import Testing

/// A vault in PostgreSQL through the command line and a mount, against a real server.
@Suite(.serialized, .tags(.mount, .postgres, .slow)) struct PostgresVaultTests {
    /// A canary's plain form and the hex form pg_dump would print a bytea holding it in.
    private static func forms(_ canary: String) -> [String] {
        [canary, canary.utf8.map { String(format: "%02x", $0) }.joined()]
    }

    @Test func commandsWorkAndTheServerHoldsOnlyCiphertext() throws {
        let server = try PostgresServer()
        let uri = try server.createDatabase("team")
        let vault = try CLIFixture(vault: uri)
        #expect(try vault.cli(["set", "web/github", "--attr", "account=canaryaccount", "--attr", "service=github"],
                              stdin: Data("canarycontent".utf8)).exitStatus == .success)
        #expect(try vault.cli(["set", "web/gitlab", "other"]).exitStatus == .success)
        #expect(try vault.cli(["get", "web/github"]).stdoutText == "canarycontent")
        #expect(try vault.cli(["attr", "web/github", "label=canarylabel"]).exitStatus == .success)
        #expect(try vault.cli(["attr", "web/github", "label"]).stdoutText == "canarylabel")
        #expect(try vault.cli(["find", "service=github"]).stdoutText == "web/github\n")
        #expect(try vault.cli(["ls", "web"]).stdoutText == "github\ngitlab\n")
        #expect(try vault.cli(["rm", "web/gitlab"]).exitStatus == .success)
        #expect(try vault.cli(["ls", "web"]).stdoutText == "github\n")
        let verified = try vault.cli(["verify"])
        #expect(verified.exitStatus == .success, "\(verified.stderr)")

        let dump = try server.dump("team")
        // The rows are there (sealed, as bytea in hex), so what is absent was looked for in them.
        #expect(dump.contains("COPY public.nodes (vault, id, parent, kind, incarnation, name_tag, name, attributes, content) FROM stdin;"))
        #expect(dump.contains("COPY public.attributes"))
        #expect(dump.split(separator: "\n").filter { $0.hasPrefix("default\t") && $0.contains("\\\\x") }.count >= 4)
        for canary in ["canarycontent", "canaryaccount", "canarylabel", "github", "gitlab"] {
            for form in PostgresVaultTests.forms(canary) { #expect(!dump.contains(form), "\(canary) in the dump") }
        }
    }

    @Test func twoVaultsInOneDatabaseStayApart() throws {
        let server = try PostgresServer()
        let uri = try server.createDatabase("shared")
        let first = try CLIFixture(vault: uri)
        let second = try CLIFixture(vault: uri + "#second")
        #expect(try first.cli(["set", "only-first", "one"]).exitStatus == .success)
        #expect(try second.cli(["set", "only-second", "two"]).exitStatus == .success)
        #expect(try first.cli(["ls"]).stdoutText == "only-first\n")
        #expect(try second.cli(["ls"]).stdoutText == "only-second\n")
        #expect(try second.cli(["get", "only-first"]).exitStatus == .notFound)
        #expect(try first.cli(["verify"]).exitStatus == .success)
        // A name is one vault: init refuses it again, and a name never made is not found.
        #expect(try first.cli(["init", "--kdf", "interactive"]).exitStatus == .alreadyExists)
        #expect(try run(keychainfsBinary, ["ls", "--vault", uri + "#never", "--passphrase-file", first.passphraseFile]).exitStatus == .unusableVault)
    }

    /// Anyone with SQL access may edit the rows: contents swapped between items, a row deleted,
    /// the next record id set back (it lies outside every MAC) are each an integrity failure,
    /// in the CLI (its exit status, no plaintext in the message) and in a mount (EIO, and the
    /// mount goes on serving what is intact).
    @Test func rowsEditedInTheDatabaseAreIntegrityFailures() throws {
        let server = try PostgresServer()
        let uri = try server.createDatabase("edited")
        let mount = try MountFixture(vault: uri)
        defer { mount.unmountQuietly() }
        let f = mount.cli
        #expect(try f.cli(["set", "first", "canary-one"]).exitStatus == .success)
        #expect(try f.cli(["set", "second", "canary-two"]).exitStatus == .success)
        #expect(try f.cli(["set", "intact", "still here"]).exitStatus == .success)
        let ids = try server.sql("edited", "SELECT id FROM nodes WHERE id > 1 ORDER BY id").split(separator: "\n")
        try #require(ids.count == 3)
        let (first, second) = (ids[0], ids[1])
        func expectIntegrityFailure(_ arguments: [String], _ what: String) throws {
            let result = try f.cli(arguments)
            #expect(result.exitStatus == .integrityFailure, "\(what): \(result.status) \(result.stderr)")
            #expect(!result.stderr.contains("canary"), "\(what): \(result.stderr)")
        }
        func readErrno(_ path: String) -> Int32 {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return errno }
            defer { close(fd) }
            var byte: UInt8 = 0
            return Glibc.read(fd, &byte, 1) < 0 ? errno : 0
        }

        try server.sql("edited", "CREATE TABLE kept AS SELECT * FROM nodes; CREATE TABLE kept_vaults AS SELECT * FROM vaults")
        let restore = "UPDATE nodes SET content = kept.content FROM kept WHERE nodes.id = kept.id"
        try server.sql("edited", """
            UPDATE nodes SET content = (SELECT content FROM kept WHERE id = \(second)) WHERE id = \(first);
            UPDATE nodes SET content = (SELECT content FROM kept WHERE id = \(first)) WHERE id = \(second)
            """)
        try expectIntegrityFailure(["get", "first"], "contents swapped")
        try expectIntegrityFailure(["verify"], "contents swapped")
        #expect(eventually { readErrno(mount.path("first")) == EIO }, "contents swapped: the mount did not say EIO")
        try server.sql("edited", restore)

        try server.sql("edited", "DELETE FROM nodes WHERE id = \(second)")
        try expectIntegrityFailure(["verify"], "a row deleted")
        try server.sql("edited", "INSERT INTO nodes SELECT * FROM kept WHERE id = \(second)")
        #expect(try f.cli(["verify"]).exitStatus == .success)

        for counter in ["-5", "0", "1"] {
            try server.sql("edited", "UPDATE vaults SET next_node_id = \(counter)")
            try expectIntegrityFailure(["set", "new-\(counter)", "value"], "next record id \(counter)")
            #expect(writeFile(mount.path("new-\(counter)"), Array("value".utf8)) == EIO, "next record id \(counter)")
            #expect(readFile(mount.path("intact")) == Array("still here".utf8), "next record id \(counter): the mount stopped")
            try server.sql("edited", "UPDATE vaults SET next_node_id = kept_vaults.next_node_id FROM kept_vaults")
        }
        #expect(listing(mount.mountpoint).sorted() == ["first", "intact", "second"])
        #expect(try f.cli(["verify"]).exitStatus == .success)
    }

    @Test func anUnreachableServerIsNamedWithoutItsPassword() throws {
        let result = try run(keychainfsBinary, ["ls", "--vault", "postgresql://someone:hunter2@/nodb?host=/nonexistent",
                                                "--passphrase-file", "/dev/null"])
        #expect(result.exitStatus != .success)
        #expect(result.stderr.contains("cannot connect to PostgreSQL at postgresql://someone@/nodb"))
        #expect(!result.stderr.contains("hunter2"))
    }

    @Test func aMountReadsAndWritesTheVaultInPostgreSQL() throws {
        let server = try PostgresServer()
        let uri = try server.createDatabase("mounted")
        let mount = try MountFixture(vault: uri)
        defer { mount.unmountQuietly() }
        try "from the mount".write(toFile: mount.path("written"), atomically: false, encoding: .utf8)
        #expect(try String(contentsOfFile: mount.path("written"), encoding: .utf8) == "from the mount")
        #expect(try mount.cli.cli(["get", "written"]).stdoutText == "from the mount")
        #expect(try mount.cli.cli(["set", "from-cli", "hello"]).exitStatus == .success)
        #expect(eventually { (try? String(contentsOfFile: mount.path("from-cli"), encoding: .utf8)) == "hello" })
    }

    /// A password in the URI (the socket trusts the user, so any will do) reaches libpq and no
    /// message: not `init`'s, the mount's, `status`'s or the daemon's log line.
    @Test func aPasswordInTheURIIsNeverShown() throws {
        let server = try PostgresServer()
        let plain = try server.createDatabase("shown")
        let uri = plain.replacingOccurrences(of: "postgresql:///", with: "postgresql://postgres:hunter2-canary@/")
        let mount = try MountFixture(vault: uri)
        defer { mount.unmountQuietly() }
        let status = try run(keychainfsBinary, ["status", mount.mountpoint])
        #expect(status.exitStatus == .success && status.stdoutText.contains("postgresql://postgres@/shown"), "\(status.stdoutText)")
        #expect(!status.stdoutText.contains("hunter2-canary"))
        // Nor the mount table, where the URI names the mount.
        let source = mountSource(mount.mountpoint) ?? ""
        #expect(source.hasPrefix("postgresql://postgres@/shown") && !source.contains("hunter2-canary"), "\(source)")
        // Nor the daemon's command line, which every local user may read for as long as it runs.
        let daemon = try run(keychainfsBinary, ["status", "--json", mount.mountpoint]).stdoutText
        let pid = try #require(daemon.split(separator: ",").first { $0.contains("\"pid\"") }?.split(separator: ":").last
            .flatMap { Int($0.trimmingCharacters(in: .whitespaces)) })
        let commandLine = try String(decoding: Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline")), as: UTF8.self)
        #expect(commandLine.contains("keychainfs") && !commandLine.contains("hunter2-canary"), "\(commandLine)")
        let remounted = try { () throws -> RunResult in
            try mount.unmount()
            return try mount.mount()
        }()
        #expect(remounted.exitStatus == .success)
        #expect(!(remounted.stdoutText + remounted.stderr).contains("hunter2-canary"), "\(remounted.stdoutText) \(remounted.stderr)")
        let initialized = try run(keychainfsBinary, ["init", "--vault", uri + "#third", "--passphrase-file", mount.cli.passphraseFile,
                                                     "--kdf", "interactive"])
        #expect(initialized.exitStatus == .success && !(initialized.stdoutText + initialized.stderr).contains("hunter2-canary"),
                "\(initialized.stdoutText) \(initialized.stderr)")
        // libpq takes a password as a query parameter too.
        let inQuery = plain + "&password=hunter2-canary#fourth"
        for command in [["init", "--kdf", "interactive"], ["init", "--kdf", "interactive"]] {  // made, then taken
            let result = try run(keychainfsBinary, command + ["--vault", inQuery, "--passphrase-file", mount.cli.passphraseFile])
            #expect(!(result.stdoutText + result.stderr).contains("hunter2-canary"), "\(result.stdoutText) \(result.stderr)")
            #expect((result.stdoutText + result.stderr).contains("#fourth"), "\(result.stdoutText) \(result.stderr)")
        }
        let taken = try run(keychainfsBinary, ["init", "--vault", inQuery, "--passphrase-file", mount.cli.passphraseFile])
        #expect(taken.exitStatus == .alreadyExists && taken.stderr.contains("a vault of that name already exists"), "\(taken.stderr)")
    }

    /// Members' slots live in the database too: a member added with the vault's passphrase
    /// reads with their own key and passphrase; removed, they are refused.
    @Test func aMemberOpensAPostgreSQLVaultWithTheirOwnKey() throws {
        let server = try PostgresServer()
        let f = try CLIFixture(vault: try server.createDatabase("team"))
        #expect(try f.cli(["set", "deploy/key"], stdin: Data("k3y".utf8)).exitStatus == .success)
        let key = f.directory + "/ann.key"
        let passphrase = try f.write("ann's own passphrase\n", to: "ann.pw")
        let made = try run(keychainfsBinary, ["member", "init", "--member-key", key, "--kdf", "interactive", "--passphrase-file", passphrase])
        let publicKey = try #require(made.stdoutText.split(separator: "\n").last.map(String.init))
        let withPassphrase = ["--vault", f.vault, "--passphrase-file", f.passphraseFile]
        let added = try run(keychainfsBinary, ["member", "add"] + withPassphrase + [publicKey, "--name", "ann"])
        #expect(added.exitStatus == .success, "\(added.stderr)")
        let asAnn = ["--vault", f.vault, "--member-key", key, "--passphrase-file", passphrase]
        let read = try run(keychainfsBinary, ["get"] + asAnn + ["deploy/key"])
        #expect(read.stdoutText == "k3y", "\(read.stderr)")
        #expect(try run(keychainfsBinary, ["member", "remove"] + withPassphrase + ["ann"]).exitStatus == .success)
        #expect(try run(keychainfsBinary, ["get"] + asAnn + ["deploy/key"]).exitStatus == .wrongPassphrase)
    }
}
