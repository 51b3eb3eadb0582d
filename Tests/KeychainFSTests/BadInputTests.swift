import Foundation
import Glibc
@testable import Support
import Testing
import VaultCore

/// Input the program cannot take is refused with a clear error, and changes nothing: vault
/// locations that are neither a file nor a URI this program reads, names that are not UTF-8,
/// and names whose control characters would forge lines where they are printed.
@Suite(.tags(.mount, .slow)) struct BadInputTests {
    static let badLocations = ["postgresql:/x", "postgresql:x", "PostgreSQL://localhost/db", "POSTGRES://localhost/db",
                               "postgres:", "postgresql:", "host=localhost dbname=vaults", " dbname = vaults", "foo://bar",
                               "file:///tmp/x.vault", ""]

    private func entries(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }

    /// Through `--vault` of every kind of command, $KEYCHAINFS_VAULT, and mount(8)'s form:
    /// a usage error, and nothing created where the command runs (or anywhere under it).
    @Test(arguments: badLocations)
    func aLocationThatIsNotAFileNorAURIThisProgramReadsIsAUsageError(location: String) throws {
        let f = try CLIFixture(create: false)
        let here = f.directory + "/cwd"
        let mountpoint = f.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: here, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        defer { if isMounted(mountpoint) { _ = try? run("/bin/fusermount3", ["-u", "-z", mountpoint]) } }
        let pw = ["--passphrase-file", f.passphraseFile]
        let attempts: [(String, [String], [String: String])] = [
            ("init", ["init", "--vault", location, "--kdf", "interactive"] + pw, [:]),
            ("set", ["set", "--vault", location] + pw + ["a", "b"], [:]),
            ("ls", ["ls", "--vault", location] + pw, [:]),
            ("mount", ["mount", "--vault", location, "--kdf", "interactive"] + pw + [mountpoint], [:]),
            // (An empty $KEYCHAINFS_VAULT is no setting at all: the default vault, not tried here.)
            ("KEYCHAINFS_VAULT", ["init", "--kdf", "interactive"] + pw, ["KEYCHAINFS_VAULT": location]),
            ("mount(8)", [location, mountpoint, "-o", "passfile=" + f.passphraseFile], [:]),
        ]
        for (what, arguments, environment) in attempts {
            if location.isEmpty && (what == "mount(8)" || what == "KEYCHAINFS_VAULT") { continue }
            // Whatever happens, not in the real home.
            let result = try run(keychainfsBinary, arguments, environment: environment.merging(["HOME": here, "XDG_DATA_HOME": here]) { a, _ in a },
                                 directory: here)
            #expect(result.exitStatus == .usage, "\(what) with \(location.debugDescription): \(result.status) \(result.stderr)")
            #expect(result.stderr.contains("vault location") || result.stderr.contains("connection string")
                    || result.stderr.contains("is not a vault location"), "\(what): \(result.stderr)")
            #expect(entries(here).isEmpty, "\(what) with \(location.debugDescription) created \(entries(here))")
            #expect(!isMounted(mountpoint))
        }
        #expect(entries(f.directory).sorted() == ["cwd", "mnt", "pw"])
    }

    /// `./NAME` is how a file whose name looks like a URI is meant; real URIs stay URIs.
    @Test func aFileNamedLikeAURIIsWrittenWithDotSlash() throws {
        let f = try CLIFixture(create: false)
        let made = try run(keychainfsBinary, ["init", "--vault", "./postgres:", "--kdf", "interactive", "--passphrase-file", f.passphraseFile],
                           directory: f.directory)
        #expect(made.exitStatus == .success, "\(made.stderr)")
        #expect(FileManager.default.fileExists(atPath: f.directory + "/postgres:"))
        #expect(try VaultLocation(parsing: "postgresql:///db?host=/run/pg#team") == .postgreSQL("postgresql:///db?host=/run/pg#team"))
        #expect(try VaultLocation(parsing: "postgres://u@h/db") == .postgreSQL("postgres://u@h/db"))
        #expect(try VaultLocation(parsing: "relative/dir:with/colon") == .file("relative/dir:with/colon"))
        #expect(try VaultLocation(parsing: "/abs/postgresql:/x") == .file("/abs/postgresql:/x"))
    }

    /// The CLI takes names from its arguments: bytes that are not UTF-8 are refused as the
    /// mount refuses them (EINVAL there, its status here), never stored as U+FFFD.
    @Test func theCLIRefusesANameThatIsNotUTF8AsTheMountDoes() throws {
        let m = try MountFixture()
        var bad = Array((m.mountpoint + "/bad").utf8) + [0xFF, 0xFE, 0]
        let fd = bad.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) { open($0, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600) }
        }
        let mountErrno = errno
        if fd >= 0 { close(fd) }
        #expect(fd < 0 && mountErrno == EINVAL)
        let set = try sh("\(keychainfsBinary) set --vault '\(m.vault)' --passphrase-file '\(m.cli.passphraseFile)' \"$(printf 'bad\\377\\376')\" value")
        #expect(set.exitStatus == ExitStatus.code(for: .invalidName("")), "\(set.status) \(set.stderr)")
        #expect(set.exitStatus == .invalidInput)
        #expect(set.stderr == "keychainfs: invalid name: a name must be valid UTF-8 (argument 6)\n", "\(set.stderr)")
        let made = try sh("\(keychainfsBinary) mkdir --vault '\(m.vault)' --passphrase-file '\(m.cli.passphraseFile)' \"$(printf 'dir\\300')\"")
        #expect(made.exitStatus == .invalidInput, "\(made.stderr)")
        #expect(try m.cli.cli(["ls", "--json"]).stdoutText == "[]\n" || m.cli.cli(["ls"]).stdoutText.isEmpty)
        #expect(listing(m.mountpoint).isEmpty)
        // A file of such a name in a directory imported: the same refusal, nothing imported.
        let top = m.cli.directory + "/tree"
        #expect(try sh("mkdir '\(top)' && echo v > '\(top)/good' && echo v > \"\(top)/$(printf 'bad\\377')\"").status == 0)
        let imported = try run(keychainfsBinary, ["import", "dir", top, "--vault", m.vault, "--passphrase-file", m.cli.passphraseFile])
        #expect(imported.exitStatus == .invalidInput && imported.stderr.contains("invalid name: a name must be valid UTF-8"), "\(imported.stderr)")
        #expect(listing(m.mountpoint).isEmpty)
    }

    /// `ls`, `ls -l`, `find`, `rules`, `attr` and `status` show control characters in names
    /// and paths as `?`, as `log` does; JSON keeps them exact.
    @Test func listingsEscapeControlCharactersAndJSONKeepsThem() throws {
        let m = try MountFixture()
        let name = "a\nforged\u{1B}[31mred\tx\u{7F}\u{9B}2J"
        let shown = "a?forged?[31mred?x??2J"
        #expect(try m.cli.cli(["set", name, "v", "--attr", "service=esc"]).exitStatus == .success)
        #expect(try m.cli.cli(["ls"]).stdoutText == shown + "\n")
        #expect(try m.cli.cli(["ls", "-l"]).stdoutText.hasSuffix("  " + shown + "\n"))
        #expect(try m.cli.cli(["find", "service=esc"]).stdoutText == shown + "\n")
        #expect(try m.cli.cli(["allow", name, "--exe", "/usr/bin/head"]).exitStatus == .success)
        let rules = try m.cli.cli(["rules"]).stdoutText
        #expect(rules.hasPrefix(shown + "\n") && !rules.contains("\u{1B}") && !rules.contains("\t"), "\(rules.debugDescription)")
        let listed = try m.cli.cli(["ls", "--json"])
        let objects = try #require(try JSONSerialization.jsonObject(with: listed.stdout) as? [[String: Any]])
        #expect(objects.first?["name"] as? String == name)
        let found = try #require(try JSONSerialization.jsonObject(with: m.cli.cli(["find", "--json", "service=esc"]).stdout) as? [[String: Any]])
        #expect(found.first?["path"] as? String == name)
        #expect(listing(m.mountpoint) == [name])
        // A refusal that names it is one line too.
        let missing = try m.cli.cli(["get", name + "\nother"])
        #expect(missing.exitStatus == .notFound && missing.stderr.split(separator: "\n").count == 1 && !missing.stderr.contains("\u{1B}"))
    }
}
