@testable import KeychainFS
import CSQLite
import Foundation
import Testing

/// Tests/Fixtures: a vault of format version 1 made by the last release before version 2.
private let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures").path

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
        #expect(formatVersion(vault) == 4)
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
        #expect(full.stderr.contains("cannot upgrade the vault from format version 1 to 4"), "\(full.stderr)")
        #expect(full.stderr.contains("still format version 1"), "\(full.stderr)")
        #expect(formatVersion(vault) == 1)

        try FileManager.default.removeItem(atPath: filler)
        let after = try cli(vault, ["get", "top"])
        #expect(after.exitStatus == .success, "\(after.stderr)")
        #expect(after.stdoutText == "root item")
        #expect(formatVersion(vault) == 4)
    }
}
