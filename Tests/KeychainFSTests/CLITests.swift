import CSQLite
import Foundation
@testable import Support
import Testing

@Suite(.tags(.slow)) struct CLITests {
    @Test func theReadmeRoundTrip() throws {
        let f = try CLIFixture()
        #expect(try f.cli(["set", "app/token"], stdin: Data("s3cret\n".utf8)).exitStatus == .success)
        let got = try f.cli(["get", "app/token"])
        #expect(got.exitStatus == .success)
        #expect(got.stdoutText == "s3cret\n")
    }

    @Test func initMakesPrivateFilesAndRefusesToOverwrite() throws {
        let f = try CLIFixture()
        var info = stat()
        #expect(stat(f.vault, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(stat(f.directory + "/vaults", &info) == 0 && info.st_mode & 0o777 == 0o700)
        let again = try f.cli(["init", "--kdf", "interactive"])
        #expect(again.exitStatus == .alreadyExists)
        #expect(again.stderr.contains("refusing to overwrite"))
        #expect(try f.cli(["verify"]).exitStatus == .success)
    }

    @Test func binaryValuesRoundTripThroughStandardInput() throws {
        let f = try CLIFixture()
        let bytes = Data((0...255).map { UInt8($0) } + [0x0A, 0x0A, 0x00])
        #expect(try f.cli(["set", "bin/all"], stdin: bytes).exitStatus == .success)
        #expect(try f.cli(["get", "bin/all"]).stdout == bytes)
        #expect(try f.cli(["set", "bin/empty"], stdin: Data()).exitStatus == .success)
        let empty = try f.cli(["get", "bin/empty"])
        #expect(empty.exitStatus == .success && empty.stdout.isEmpty)
        #expect(try f.cli(["set", "bin/arg", "from the command line"]).exitStatus == .success)
        #expect(try f.cli(["get", "bin/arg"]).stdoutText == "from the command line")
    }

    @Test func oversizedInputIsRefusedAndNothingIsStored() throws {
        let f = try CLIFixture()
        let limit = 1 << 20
        #expect(try f.cli(["set", "big"], stdin: Data(repeating: 7, count: limit)).exitStatus == .success)
        let over = try f.cli(["set", "big"], stdin: Data(repeating: 8, count: limit + 1))
        #expect(over.exitStatus == .invalidInput)
        #expect(over.stderr.contains("item too large: 1048577 bytes exceeds this vault's limit of 1048576 bytes"))
        #expect(try f.cli(["get", "big"]).stdout == Data(repeating: 7, count: limit))
        #expect(try f.cli(["set", "other"], stdin: Data(repeating: 8, count: limit + 1)).exitStatus == .invalidInput)
        #expect(try f.cli(["get", "other"]).exitStatus == .notFound)
    }

    @Test func wrongPassphraseAndPassphraseSources() throws {
        let f = try CLIFixture()
        try f.cli(["set", "k", "v"])
        let wrong = try f.write("not it\n", to: "wrong")
        let refused = try f.cli(["get", "k"], passphraseFile: wrong)
        #expect(refused.exitStatus == .wrongPassphrase)
        #expect(refused.stderr == "keychainfs: wrong passphrase\n")
        // Standard input and --extpass give the same passphrase.
        let viaStdin = try run(keychainfsBinary, ["get", "--vault", f.vault, "--passphrase-file", "-", "k"],
                               stdin: Data("correct horse battery staple\n".utf8))
        #expect(viaStdin.stdoutText == "v")
        let viaCommand = try run(keychainfsBinary, ["get", "--vault", f.vault, "--extpass", "cat \(f.passphraseFile)", "k"])
        #expect(viaCommand.stdoutText == "v")
        let failing = try run(keychainfsBinary, ["get", "--vault", f.vault, "--extpass", "exit 3", "k"])
        #expect(failing.exitStatus == .invalidInput)
        #expect(failing.stderr.contains("--extpass command failed"))
        // No terminal, no passphrase option: a clear error, not a hang.
        let none = try run(keychainfsBinary, ["get", "--vault", f.vault, "k"])
        #expect(none.exitStatus != .success)
        #expect(none.stderr.contains("--passphrase-file"))
    }

    @Test func passwdKeepsEveryItemAndRetiresTheOldPassphrase() throws {
        let f = try CLIFixture()
        for i in 0..<10 { try f.cli(["set", "dir\(i % 2)/item\(i)", "value\(i)"]) }
        let newFile = try f.write("the new passphrase\n", to: "new")
        let changed = try f.cli(["passwd", "--new-passphrase-file", newFile])
        #expect(changed.exitStatus == .success, "\(changed.stderr)")
        #expect(try f.cli(["get", "dir0/item0"]).exitStatus == .wrongPassphrase)
        for i in 0..<10 {
            #expect(try f.cli(["get", "dir\(i % 2)/item\(i)"], passphraseFile: newFile).stdoutText == "value\(i)")
        }
    }

    @Test func listRemoveMakeDictionaryAndMove() throws {
        let f = try CLIFixture()
        try f.cli(["set", "app/token", "t"])
        try f.cli(["set", "app/pw", "pw!"])
        #expect(try f.cli(["mkdir", "app/sub"]).exitStatus == .success)
        #expect(try f.cli(["mkdir", "app/sub"]).exitStatus == .alreadyExists)
        #expect(try f.cli(["mkdir", "-p", "x/y/z"]).exitStatus == .success)
        #expect(try f.cli(["ls"]).stdoutText == "app/\nx/\n")
        #expect(try f.cli(["ls", "app"]).stdoutText == "pw\nsub/\ntoken\n")
        let long = try f.cli(["ls", "-l", "app"]).stdoutText.split(separator: "\n")
        #expect(long.count == 3 && long[0].hasPrefix("        3  ") && long[0].hasSuffix("  pw"))
        #expect(try f.cli(["rm", "app"]).exitStatus == .wrongKind)
        #expect(try f.cli(["mv", "app/token", "x/y"]).exitStatus == .success)
        #expect(try f.cli(["get", "x/y/token"]).stdoutText == "t")
        #expect(try f.cli(["mv", "x", "x/y/z/inside"]).exitStatus == .invalidInput)
        #expect(try f.cli(["rm", "-r", "app"]).exitStatus == .success)
        #expect(try f.cli(["get", "app/pw"]).exitStatus == .notFound)
        #expect(try f.cli(["get", "x/y"]).exitStatus == .wrongKind)
        #expect(try f.cli(["get", "missing/item"]).stderr == "keychainfs: missing: no such item or dictionary\n")
        #expect(try f.cli(["ls", "-l"]).exitStatus == .success)
    }

    @Test func badNamesAndUsageGetClearErrors() throws {
        let f = try CLIFixture()
        let tooLong = try f.cli(["set", "d/" + String(repeating: "n", count: 256), "v"])
        #expect(tooLong.exitStatus == .invalidInput)
        #expect(tooLong.stderr.contains("names are at most 255 bytes"))
        #expect(try f.cli(["set", "d/../x", "v"]).exitStatus == .invalidInput)
        #expect(try f.cli(["set", "d/" + String(repeating: "n", count: 255), "v"]).exitStatus == .success)
        #expect(try f.cli(["ls", "d"]).stdoutText == String(repeating: "n", count: 255) + "\n")
        #expect(try f.cli(["get"]).exitStatus == .usage)  // missing PATH
        #expect(try f.cli(["ls", "--frobnicate"]).exitStatus == .usage)
        // An unknown word is taken as a mountpoint (`keychainfs MOUNTPOINT`), and says so.
        let unknown = try run(keychainfsBinary, ["frobnicate"])
        #expect(unknown.exitStatus == .mountFailure && unknown.stderr.contains("mountpoint frobnicate: does not exist"))
        let both = try run(keychainfsBinary, ["set", "--vault", f.vault, "--passphrase-file", "-", "k"])
        #expect(both.exitStatus == .usage)
    }

    @Test func unusableVaultFilesGetClearErrors() throws {
        let f = try CLIFixture(create: false)
        let missing = try f.cli(["get", "x"])
        #expect(missing.exitStatus == .unusableVault)
        #expect(missing.stderr.contains("no vault here"))
        try FileManager.default.createDirectory(atPath: f.vault, withIntermediateDirectories: true)
        #expect(try f.cli(["get", "x"]).stderr.contains("it is a directory"))
        try FileManager.default.removeItem(atPath: f.vault)
        FileManager.default.createFile(atPath: f.vault, contents: Data("hello, I am text\n".utf8))
        let text = try f.cli(["get", "x"])
        #expect(text.exitStatus == .unusableVault)
        #expect(text.stderr.contains("not a KeychainFS vault"))
    }

    @Test func newerFormatVersionIsRefused() throws {
        let f = try CLIFixture()
        var db: OpaquePointer?
        #expect(sqlite3_open(f.vault, &db) == SQLITE_OK)
        #expect(sqlite3_exec(db, "PRAGMA user_version = 10", nil, nil, nil) == SQLITE_OK)
        sqlite3_close(db)
        let result = try f.cli(["get", "x"])
        #expect(result.exitStatus == .unusableVault)
        #expect(result.stderr.contains("vault format version 10 is newer than this keychainfs supports (9)"))
    }

    @Test func verifyNamesTheDamagedPath() throws {
        let f = try CLIFixture()
        try f.cli(["set", "app/token", "token-value"])
        try f.cli(["set", "app/other", "fine"])
        #expect(try f.cli(["verify"]).exitStatus == .success)
        var db: OpaquePointer?
        #expect(sqlite3_open(f.vault, &db) == SQLITE_OK)
        // Flip one bit inside the ciphertext (past the 24-byte nonce) of node 3, which is app/token.
        var statement: OpaquePointer?
        sqlite3_prepare_v2(db, "SELECT content FROM nodes WHERE id = 3", -1, &statement, nil)
        #expect(sqlite3_step(statement) == SQLITE_ROW)
        var blob = Array(UnsafeRawBufferPointer(start: sqlite3_column_blob(statement, 0), count: Int(sqlite3_column_bytes(statement, 0))))
        sqlite3_finalize(statement)
        blob[30] ^= 0x04
        sqlite3_prepare_v2(db, "UPDATE nodes SET content = ? WHERE id = 3", -1, &statement, nil)
        _ = blob.withUnsafeBytes { sqlite3_bind_blob(statement, 1, $0.baseAddress, Int32($0.count), nil) }
        #expect(sqlite3_step(statement) == SQLITE_DONE)
        sqlite3_finalize(statement)
        sqlite3_close(db)
        let verify = try f.cli(["verify"])
        #expect(verify.exitStatus == .integrityFailure)
        #expect(verify.stderr.contains("integrity failure: app/token: content failed authentication"))
        let get = try f.cli(["get", "app/token"])
        #expect(get.exitStatus == .integrityFailure)
        #expect(get.stdout.isEmpty)
        #expect(try f.cli(["get", "app/other"]).stdoutText == "fine")
    }

    @Test func twoProcessesWritingAtOnceLoseNothing() throws {
        let f = try CLIFixture()
        let script = """
            for i in $(seq 1 15); do
              printf 'value-%s-%s' "$1" "$i" | "$0" set --vault "$2" --passphrase-file "$3" "shared/w$1-$i" || exit 1
            done
            """
        let writers = try (0..<2).map { writer in
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/bin/sh")
            p.arguments = ["-c", script, keychainfsBinary, String(writer), f.vault, f.passphraseFile]
            try p.run()
            return p
        }
        for p in writers { p.waitUntilExit(); #expect(p.terminationStatus == 0) }
        let listing = try f.cli(["ls", "shared"]).stdoutText.split(separator: "\n")
        #expect(listing.count == 30)
        for writer in 0..<2 {
            for i in 1...15 { #expect(try f.cli(["get", "shared/w\(writer)-\(i)"]).stdoutText == "value-\(writer)-\(i)") }
        }
    }

    @Test func defaultVaultLocationFollowsTheEnvironment() throws {
        let f = try CLIFixture(create: false)
        let env = ["XDG_DATA_HOME": f.directory + "/xdg"]
        let created = try run(keychainfsBinary, ["init", "--kdf", "interactive", "--passphrase-file", f.passphraseFile], environment: env)
        #expect(created.exitStatus == .success)
        #expect(FileManager.default.fileExists(atPath: f.directory + "/xdg/keychainfs/default.vault"))
        let viaVariable = try run(keychainfsBinary, ["init", "--kdf", "interactive", "--passphrase-file", f.passphraseFile],
                                  environment: ["KEYCHAINFS_VAULT": f.directory + "/env.vault"])
        #expect(viaVariable.exitStatus == .success)
        #expect(FileManager.default.fileExists(atPath: f.directory + "/env.vault"))
    }

    /// `--help` lists every row of the exit status table (ArgumentParser may wrap a long one).
    @Test func helpListsEveryExitStatus() throws {
        let help = try run(keychainfsBinary, ["--help"])
        #expect(help.exitStatus == .success)
        let words = help.stdoutText.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for status in Support.ExitStatus.allCases {
            let row = "\(status.rawValue) \(status.meaning)".split(whereSeparator: \.isWhitespace).joined(separator: " ")
            #expect(words.contains(row), "--help lacks: \(row)")
        }
    }
}
