import CSQLite
import Foundation
import Testing
@testable import VaultCore

/// Tests/Fixtures: vaults of format versions 1 and 4 made by the last commits before versions 2 and 5.
private let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures").path

/// As someone with the file would do it, outside keychainfs.
private func setFormatVersion(_ file: String, _ version: Int) {
    var db: OpaquePointer?
    precondition(sqlite3_open(file, &db) == SQLITE_OK)
    defer { sqlite3_close(db) }
    precondition(sqlite3_exec(db, "PRAGMA user_version = \(version)", nil, nil, nil) == SQLITE_OK)
}

private func formatVersion(_ file: String) -> Int64 {
    var db: OpaquePointer?
    precondition(sqlite3_open_v2(file, &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK)
    defer { sqlite3_close(db) }
    var statement: OpaquePointer?
    precondition(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &statement, nil) == SQLITE_OK)
    defer { sqlite3_finalize(statement) }
    precondition(sqlite3_step(statement) == SQLITE_ROW)
    return sqlite3_column_int64(statement, 0)
}

@Suite struct FormatUpgradeCLITests {
    private func cli(_ vault: String, _ arguments: [String]) throws -> RunResult {
        var args = arguments
        args.insert(contentsOf: ["--vault", vault, "--passphrase-file", fixtures + "/v1.passphrase"], at: 1)
        return try run(keychainfsBinary, args)
    }

    @Test func theCommandLineUpgradesAVersion1VaultOnFirstUse() throws {
        let f = try CLIFixture(create: false)
        let vault = f.directory + "/v1.vault"
        try FileManager.default.copyItem(atPath: fixtures + "/v1.vault", toPath: vault)

        let token = try cli(vault, ["get", "app/token"])
        #expect(token.exitStatus == .success, "\(token.stderr)")
        #expect(token.stdoutText == "ghp_fixtureToken123")
        #expect(formatVersion(vault) == Int64(VaultFormat.version))
        #expect(try cli(vault, ["get", "app/nested/deep/big"]).stdout == Data(repeating: 0x78, count: 5000))
        #expect(try cli(vault, ["get", "unicode/n\\xc3\\xa4me with spaces"]).stdoutText == "héllo wörld\n")
        #expect(try cli(vault, ["ls"]).stdoutText == "app/\nempty-dict/\ntop\nunicode/\n")
        #expect(try cli(vault, ["verify"]).exitStatus == .success)
    }

    @Test func aFullDiskLeavesVersion1AndSaysSo() throws {
        let small = try SmallFilesystem(size: "256k")
        let vault = small.mountpoint + "/v1.vault"
        try FileManager.default.copyItem(atPath: fixtures + "/v1.vault", toPath: vault)
        let filler = small.mountpoint + "/filler"
        _ = try run("/bin/dd", ["if=/dev/zero", "of=\(filler)", "bs=4k"])

        let full = try cli(vault, ["get", "top"])
        #expect(full.exitStatus == .storage)
        #expect(full.stderr.contains("cannot upgrade the vault from format version 1 to \(VaultFormat.version)"), "\(full.stderr)")
        #expect(full.stderr.contains("still format version 1"), "\(full.stderr)")
        #expect(formatVersion(vault) == 1)

        try FileManager.default.removeItem(atPath: filler)
        let after = try cli(vault, ["get", "top"])
        #expect(after.exitStatus == .success, "\(after.stderr)")
        #expect(after.stdoutText == "root item")
        #expect(formatVersion(vault) == Int64(VaultFormat.version))
    }

    /// A vault of 4 is upgraded (to 5 and on) before its first label is stored; `verify` then finds
    /// nothing wrong, and the number can be neither set back nor read by code of an older format.
    @Test func aVersion4VaultTakesLabelsAtFormat5AndKeepsThatNumber() throws {
        let f = try CLIFixture(create: false)
        let vault = f.directory + "/v4.vault"
        try FileManager.default.copyItem(atPath: fixtures + "/v4.vault", toPath: vault)

        let label = try cli(vault, ["label", "app/token", "GitHub token"])
        #expect(label.exitStatus == .success, "\(label.stderr)")
        #expect(formatVersion(vault) == Int64(VaultFormat.version))
        #expect(try cli(vault, ["label", "app/token"]).stdoutText == "GitHub token")
        #expect(try cli(vault, ["get", "app/token"]).stdoutText == "ghp_v4FixtureToken")
        #expect(try cli(vault, ["attr", "mail/work/password", "service"]).stdoutText == "mail")
        let verify = try cli(vault, ["verify"])
        #expect(verify.exitStatus == .success, "\(verify.stdoutText) \(verify.stderr)")

        setFormatVersion(vault, 4)
        let setBack = try cli(vault, ["verify"])
        #expect(setBack.exitStatus == .integrityFailure)
        #expect(setBack.stderr.contains("the format version was set back to 4"), "\(setBack.stderr)")

        let next = VaultFormat.version + 1
        setFormatVersion(vault, next)
        let newer = try cli(vault, ["get", "app/token"])
        #expect(newer.exitStatus == .unusableVault)
        #expect(newer.stderr.contains("vault format version \(next) is newer than this keychainfs supports (\(VaultFormat.version))"),
                "\(newer.stderr)")
        #expect(formatVersion(vault) == Int64(next))
    }
}
