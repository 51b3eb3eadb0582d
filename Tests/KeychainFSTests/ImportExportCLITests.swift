import Foundation
import Testing

/// `import pass|dotenv|dir|archive` and `export` through the real binary. Each command opens
/// the vault anew, so what is checked was read back from the file.
@Suite(.tags(.slow)) struct ImportExportCLITests {
    /// `keychainfs ARGS... --vault V --passphrase-file P` (the options after the subcommand's path).
    @discardableResult
    private func kfs(_ f: CLIFixture, _ arguments: [String], stdin: Data? = nil, environment: [String: String] = [:]) throws -> RunResult {
        try run(keychainfsBinary, arguments + ["--vault", f.vault, "--passphrase-file", f.passphraseFile], stdin: stdin,
                environment: environment)
    }

    private func value(_ f: CLIFixture, _ path: String) throws -> Data {
        let result = try kfs(f, ["get", path])
        #expect(result.exitStatus == .success, "\(path): \(result.stderr)")
        return result.stdout
    }

    /// The whole vault as text (but times), walked with `ls --json`, `get --json` and `rules --json`: what
    /// a failed import must leave exactly as it was.
    private func snapshot(_ f: CLIFixture, _ dictionary: String = "") throws -> String {
        let listing = try kfs(f, ["ls", "--json", dictionary])
        #expect(listing.exitStatus == .success, "\(listing.stderr)")
        var entries = try #require(try JSONSerialization.jsonObject(with: listing.stdout) as? [[String: Any]])
        // Times are when each vault was written, not what it holds.
        for index in entries.indices { entries[index]["modified"] = nil }
        var text = dictionary + " " + String(decoding: try JSONSerialization.data(withJSONObject: entries, options: .sortedKeys), as: UTF8.self)
        for entry in entries {
            let name = try #require(entry["name"] as? String)
            let path = dictionary.isEmpty ? name : dictionary + "/" + name
            if entry["kind"] as? String == "dictionary" {
                text += try snapshot(f, path)
            } else {
                text += try kfs(f, ["get", "--json", path]).stdoutText
            }
        }
        if dictionary.isEmpty { text += try kfs(f, ["rules", "--json"]).stdoutText }
        return text
    }

    private func scratchFile(_ f: CLIFixture, _ name: String, _ bytes: [UInt8]) throws -> String {
        let path = f.directory + "/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    // MARK: pass

    @Test func aPassStoreImportsByteForByte() throws {
        let f = try CLIFixture()
        // A real key in a private GnuPG home (short: the agent's socket path has a length limit).
        let home = "/tmp/kfs-gpg-" + String(UUID().uuidString.prefix(8))
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let gpgEnvironment = ["GNUPGHOME": home]
        defer {
            _ = try? run("/usr/bin/gpgconf", ["--kill", "gpg-agent"], environment: gpgEnvironment)
            try? FileManager.default.removeItem(atPath: home)
        }
        let generated = try run("/usr/bin/gpg", ["--batch", "--passphrase", "", "--quick-gen-key", "KeychainFS Test <kfs@example.invalid>",
                                                 "future-default", "default", "never"], environment: gpgEnvironment)
        try #require(generated.status == 0, "\(generated.stderr)")
        let store = f.directory + "/password-store"
        let binary: [UInt8] = (0..<600).map { UInt8(truncatingIfNeeded: $0 &* 151 &+ 7) } + [0, 0x0A, 0xFF, 0]
        let plaintexts: [(String, [UInt8])] = [
            ("email/work", Array("hunter2\n".utf8)),
            ("email/personal/gmail.com", Array("no newline".utf8)),
            ("top", Array("line one\nline two\n\n".utf8)),
            ("keys/binary", binary),
            ("empty", []),
        ]
        try FileManager.default.createDirectory(atPath: store + "/.git", withIntermediateDirectories: true)
        try "kfs@example.invalid\n".write(toFile: store + "/.gpg-id", atomically: true, encoding: .utf8)
        for (name, bytes) in plaintexts {
            let file = store + "/" + name + ".gpg"
            try FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            let encrypted = try run("/usr/bin/gpg", ["--batch", "--yes", "--trust-model", "always", "-r", "kfs@example.invalid",
                                                     "-o", file, "--encrypt"], stdin: Data(bytes), environment: gpgEnvironment)
            try #require(encrypted.status == 0, "\(encrypted.stderr)")
        }
        // Not a pass entry: left alone.
        try "notes".write(toFile: store + "/README", atomically: true, encoding: .utf8)

        let imported = try kfs(f, ["import", "pass", store], environment: gpgEnvironment)
        #expect(imported.exitStatus == .success, "\(imported.stderr)")
        #expect(imported.stderr == "imported 5 items\n")
        for (name, bytes) in plaintexts { #expect(try value(f, name) == Data(bytes), "\(name)") }
        #expect(try kfs(f, ["ls", ""]).stdoutText == "email/\nempty\nkeys/\ntop\n")

        // Again: every item exists, so nothing changes without --replace; --into puts a copy elsewhere.
        let again = try kfs(f, ["import", "pass", store], environment: gpgEnvironment)
        #expect(again.exitStatus == .alreadyExists)
        #expect(again.stderr.contains("nothing was imported"))
        #expect(try kfs(f, ["import", "pass", store, "--into", "pass"], environment: gpgEnvironment).exitStatus == .success)
        #expect(try value(f, "pass/keys/binary") == Data(binary))

        // A file gpg cannot decrypt names itself, and nothing of the store is imported.
        try Data("not openpgp".utf8).write(to: URL(fileURLWithPath: store + "/broken.gpg"))
        let broken = try kfs(f, ["import", "pass", store, "--into", "other"], environment: gpgEnvironment)
        #expect(broken.exitStatus == .invalidInput)
        #expect(broken.stderr.contains("broken.gpg"))
        #expect(try kfs(f, ["ls", "other"]).exitStatus == .notFound)
    }

    // MARK: dotenv and dir

    @Test func aDotenvFileImportsAsDotenvReadsIt() throws {
        let f = try CLIFixture()
        let env = try f.write("""
            # a comment

            PLAIN=value
            export EXPORTED=yes
            SPACED = trimmed value   # a comment
            HASH=a#b
            DOUBLE="two\\nlines \\"quoted\\" # kept"
            SINGLE='raw \\n $HOME'
            MULTI="first
            second"
            EMPTY=
            PLAIN=last wins
            """, to: "app.env")
        let result = try kfs(f, ["import", "dotenv", env, "--into", "app"])
        #expect(result.exitStatus == .success, "\(result.stderr)")
        let expected = ["PLAIN": "last wins", "EXPORTED": "yes", "SPACED": "trimmed value", "HASH": "a#b",
                        "DOUBLE": "two\nlines \"quoted\" # kept", "SINGLE": "raw \\n $HOME", "MULTI": "first\nsecond", "EMPTY": ""]
        for (key, text) in expected { #expect(try value(f, "app/" + key) == Data(text.utf8), "\(key)") }
        #expect(try kfs(f, ["ls", "app"]).stdoutText.split(separator: "\n").count == expected.count)

        let bad = try f.write("GOOD=1\nthis is not a variable\n", to: "bad.env")
        let failed = try kfs(f, ["import", "dotenv", bad, "--into", "bad"])
        #expect(failed.exitStatus == .invalidInput)
        #expect(failed.stderr.contains("line 2"))
        #expect(try kfs(f, ["ls", "bad"]).exitStatus == .notFound)
    }

    @Test func aDirectoryImportsWithItsTree() throws {
        let f = try CLIFixture()
        let top = f.directory + "/tree"
        try FileManager.default.createDirectory(atPath: top + "/a/b", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: top + "/empty", withIntermediateDirectories: true)
        let binary: [UInt8] = [0, 1, 2, 0xFF, 0x0A, 0]
        _ = try scratchFile(f, "tree/a/b/bin", binary)
        _ = try scratchFile(f, "tree/.hidden", Array("h".utf8))
        _ = try scratchFile(f, "tree/top", Array("t\n".utf8))
        try FileManager.default.createSymbolicLink(atPath: top + "/link", withDestinationPath: "/etc/passwd")
        let result = try kfs(f, ["import", "dir", top, "--into", "files"])
        #expect(result.exitStatus == .success, "\(result.stderr)")
        #expect(result.stderr.contains("link: not a regular file or directory; left out"))
        #expect(try value(f, "files/a/b/bin") == Data(binary))
        #expect(try value(f, "files/.hidden") == Data("h".utf8))
        #expect(try value(f, "files/top") == Data("t\n".utf8))
        #expect(try kfs(f, ["ls", "files"]).stdoutText == ".hidden\na/\nempty/\ntop\n")
    }

    // MARK: archives

    /// A vault with attributes, labels, item classes, a dictionary default, rules, and a
    /// this-device-only item, which no archive carries.
    private func populated(hostKey: [String: String]) throws -> CLIFixture {
        let f = try CLIFixture()
        for (path, value) in [("app/token", "t0k3n"), ("app/db/password", "pw"), ("web/cookie", "c"), ("top", "1")] {
            #expect(try kfs(f, ["set", path, value]).exitStatus == .success)
        }
        #expect(try kfs(f, ["set", "bin", "--attr", "kind=binary"], stdin: Data([0, 0xFF, 0x0A])).exitStatus == .success)
        #expect(try kfs(f, ["attr", "app/token", "service=github"]).exitStatus == .success)
        #expect(try kfs(f, ["attr", "app", "team=ops"]).exitStatus == .success)
        #expect(try kfs(f, ["label", "app/token", "GitHub token"]).exitStatus == .success)
        #expect(try kfs(f, ["label", "web", "Web"]).exitStatus == .success)
        #expect(try kfs(f, ["class", "app/db/password", "after-first-unlock"]).exitStatus == .success)
        #expect(try kfs(f, ["class", "web", "after-first-unlock"]).exitStatus == .success)
        #expect(try kfs(f, ["allow", "app", "--exe", "/bin/cat", "--read-only"]).exitStatus == .success)
        #expect(try kfs(f, ["allow", "app/token", "--unit", "backup.service", "--confirm"]).exitStatus == .success)
        #expect(try kfs(f, ["set", "local/only", "here", "--class", "this-device-only"], environment: hostKey).exitStatus == .success)
        return f
    }

    private func export(_ f: CLIFixture, to archive: String, passphraseFile: String) throws -> RunResult {
        try kfs(f, ["export", "--to", archive, "--archive-passphrase-file", passphraseFile, "--kdf", "interactive"])
    }

    @Test func anArchiveRoundTripsAVault() throws {
        let hostKey = ["KEYCHAINFS_HOST_KEY": NSTemporaryDirectory() + "kfs-host-" + UUID().uuidString]
        defer { try? FileManager.default.removeItem(atPath: hostKey["KEYCHAINFS_HOST_KEY"]!) }
        let source = try populated(hostKey: hostKey)
        let archivePassphrase = try source.write("archive passphrase\n", to: "archive-pw")
        let archive = source.directory + "/vault.kcfs"
        let exported = try export(source, to: archive, passphraseFile: archivePassphrase)
        #expect(exported.exitStatus == .success, "\(exported.stderr)")
        #expect(exported.stderr.contains("1 this-device-only item left out"))
        // The archive is not readable as it is.
        let raw = try Data(contentsOf: URL(fileURLWithPath: archive))
        #expect(raw.range(of: Data("t0k3n".utf8)) == nil && raw.range(of: Data("GitHub".utf8)) == nil)
        #expect(raw.range(of: Data("service".utf8)) == nil && raw.range(of: Data("backup".utf8)) == nil)
        // An existing file is never overwritten.
        #expect(try export(source, to: archive, passphraseFile: archivePassphrase).exitStatus == .invalidInput)

        let target = try CLIFixture(passphrase: "another vault's passphrase")
        let imported = try kfs(target, ["import", "archive", archive, "--archive-passphrase-file", archivePassphrase])
        #expect(imported.exitStatus == .success, "\(imported.stderr)")
        // Everything but the this-device-only item, which stays behind (its dictionary comes, empty).
        #expect(try kfs(source, ["rm", "local/only"]).exitStatus == .success)
        #expect(try snapshot(target) == snapshot(source))
        #expect(try kfs(target, ["get", "--json", "app/db/password"]).stdoutText.contains("\"class\":\"after-first-unlock\""))
        #expect(try kfs(target, ["class", "web"]).stdoutText == "after-first-unlock\n")
        #expect(try kfs(target, ["rules"]).stdoutText == "app\n    --exe /bin/cat --read-only\napp/token\n    --unit backup.service --confirm\n")
        // The rules came in as `allow` makes them: with their entries in the access log.
        let log = try kfs(target, ["log"]).stdoutText.split(separator: "\n").filter { $0.contains("rule-change") }
        #expect(log.count == 2 && log[0].hasSuffix(" app") && log[1].hasSuffix(" app/token"), "\(log)")
    }

    @Test func badArchivesAndHalfFailedImportsLoseNothing() throws {
        let hostKey = ["KEYCHAINFS_HOST_KEY": NSTemporaryDirectory() + "kfs-host-" + UUID().uuidString]
        defer { try? FileManager.default.removeItem(atPath: hostKey["KEYCHAINFS_HOST_KEY"]!) }
        let source = try populated(hostKey: hostKey)
        let archivePassphrase = try source.write("archive passphrase\n", to: "archive-pw")
        let archive = source.directory + "/vault.kcfs"
        #expect(try export(source, to: archive, passphraseFile: archivePassphrase).exitStatus == .success)
        let good = [UInt8](try Data(contentsOf: URL(fileURLWithPath: archive)))

        let target = try CLIFixture()
        #expect(try kfs(target, ["set", "web/cookie", "mine"]).exitStatus == .success)
        #expect(try kfs(target, ["set", "other", "o"]).exitStatus == .success)
        let before = try snapshot(target)
        func importing(_ bytes: [UInt8], passphraseFile: String? = nil, replace: Bool = false) throws -> RunResult {
            let file = try scratchFile(source, "attempt.kcfs", bytes)
            return try kfs(target, ["import", "archive", file, "--archive-passphrase-file", passphraseFile ?? archivePassphrase]
                                   + (replace ? ["--replace"] : []))
        }
        // Changed bytes: in the salt (a different key), the first message, a later one, the last.
        for offset in [30, 70, good.count / 2, good.count - 3] {
            var changed = good
            changed[offset] ^= 0x01
            let result = try importing(changed)
            #expect(result.exitStatus != .success, "byte \(offset)")
            #expect(result.stderr.contains("nothing was imported"), "byte \(offset): \(result.stderr)")
        }
        // Cut anywhere, even just before its end, or with bytes after its end.
        for length in [0, 10, 66, 100, good.count / 2, good.count - 1] {
            let result = try importing(Array(good.prefix(length)))
            #expect(result.exitStatus == .invalidInput, "cut at \(length): \(result.stderr)")
        }
        let trailing = try importing(good + [0])
        #expect(trailing.exitStatus == .invalidInput)
        #expect(trailing.stderr.contains("bytes follow its end"))
        // The wrong passphrase.
        let wrong = try importing(good, passphraseFile: try source.write("not it\n", to: "wrong-pw"))
        #expect(wrong.exitStatus == .wrongPassphrase)
        #expect(wrong.stderr.contains("wrong archive passphrase"))
        // A good archive with an item the vault already has, in the middle: nothing without --replace.
        let clash = try importing(good)
        #expect(clash.exitStatus == .alreadyExists)
        #expect(clash.stderr.contains("import failed at web/cookie"))
        #expect(try snapshot(target) == before)
        // With --replace it goes in, and what the vault had besides stays.
        #expect(try importing(good, replace: true).exitStatus == .success)
        #expect(try value(target, "web/cookie") == Data("c".utf8))
        #expect(try value(target, "other") == Data("o".utf8))
    }

    // MARK: progress

    @Test func aProgressBarShowsOnlyOnATerminal() throws {
        let f = try CLIFixture()
        let lines = (0..<150).map { "KEY_\($0)=value \($0)" }.joined(separator: "\n")
        let env = try f.write(lines, to: "many.env")
        let quiet = try kfs(f, ["import", "dotenv", env, "--into", "quiet"])
        #expect(quiet.exitStatus == .success)
        #expect(quiet.stderr == "imported 150 items\n")
        // On a terminal (script(1) gives the command one): the bar and its estimate.
        let command = [keychainfsBinary, "import", "dotenv", env, "--into", "loud", "--vault", f.vault, "--passphrase-file", f.passphraseFile]
            .map { "'" + $0 + "'" }.joined(separator: " ")
        let onTerminal = try run("/usr/bin/script", ["-qec", command, "/dev/null"])
        #expect(onTerminal.status == 0, "\(onTerminal.stderr)")
        #expect(onTerminal.stdoutText.contains("ETA"))
        #expect(onTerminal.stdoutText.contains("150/150"))
        #expect(try kfs(f, ["ls", "loud"]).stdoutText.split(separator: "\n").count == 150)
        // verify, over the 300 items and their dictionaries: the same.
        let verified = try kfs(f, ["verify"])
        #expect(verified.stderr == "vault verified: every record authenticated\n")
        let verifyCommand = [keychainfsBinary, "verify", "--vault", f.vault, "--passphrase-file", f.passphraseFile]
            .map { "'" + $0 + "'" }.joined(separator: " ")
        let verifiedOnTerminal = try run("/usr/bin/script", ["-qec", verifyCommand, "/dev/null"])
        #expect(verifiedOnTerminal.status == 0)
        #expect(verifiedOnTerminal.stdoutText.contains("verify ["))
        #expect(verifiedOnTerminal.stdoutText.contains("303/303"))
    }
}
