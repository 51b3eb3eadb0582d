import CSQLite
import Foundation
import Glibc
import Testing

private let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures").path

/// A vault gives back the space of what was removed from it: after 2 000 items with content
/// are created and most of them removed through the mount, the vault file and its WAL come
/// within a small factor of a fresh vault holding what is left, without an unmount.
@Suite(.tags(.mount, .slow)) struct VaultSpaceTests {
    /// 20 dictionaries of 100 items of 4 000 random bytes each; `keep` of them stay.
    static let create = """
        import os, sys
        root, dictionaries = sys.argv[1], int(sys.argv[2])
        for k in range(dictionaries):
            os.mkdir(os.path.join(root, 'd%d' % k))
            for i in range(100):
                with open(os.path.join(root, 'd%d' % k, 's%d' % i), 'wb') as f: f.write(os.urandom(4000))
        """

    static func bytesOnDisk(_ vault: String) -> Int {
        [vault, vault + "-wal"].reduce(0) { total, file in
            var info = stat()
            return total + (stat(file, &info) == 0 ? Int(info.st_size) : 0)
        }
    }

    static func pragma(_ file: String, _ name: String) -> Int64 {
        var db: OpaquePointer?
        precondition(sqlite3_open_v2(file, &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK)
        defer { sqlite3_close(db) }
        var statement: OpaquePointer?
        precondition(sqlite3_prepare_v2(db, "PRAGMA \(name)", -1, &statement, nil) == SQLITE_OK)
        defer { sqlite3_finalize(statement) }
        precondition(sqlite3_step(statement) == SQLITE_ROW)
        return sqlite3_column_int64(statement, 0)
    }

    /// What a fresh vault holding one dictionary of those items takes, its WAL checkpointed
    /// away (a command's last connection does that as it closes).
    static func freshVaultBytes() throws -> Int {
        let fresh = try MountFixture()
        #expect(try run("/usr/bin/python3", ["-c", create, fresh.mountpoint, "1"]).status == 0)
        let freshUnmount = try fresh.unmount()
        #expect(freshUnmount.status == 0, "\(freshUnmount.stderr)")
        #expect(try fresh.cli.cli(["verify"]).status == 0)
        return bytesOnDisk(fresh.vault)
    }

    /// Creates 2 000 items, removes all but the first dictionary's 100, and waits for the
    /// vault to give the space back.
    static func expectSpaceGivenBack(_ m: MountFixture) throws {
        #expect(try run("/usr/bin/python3", ["-c", create, m.mountpoint, "20"]).status == 0)
        let full = bytesOnDisk(m.vault)
        for k in 1..<20 { #expect(try run("/bin/rm", ["-r", m.path("d\(k)")]).status == 0) }
        let fresh = try freshVaultBytes()
        let shrunk = eventually(within: 20) { bytesOnDisk(m.vault) <= 3 * fresh }
        #expect(shrunk, "vault and WAL: \(bytesOnDisk(m.vault)) bytes; with 2 000 items \(full); a fresh vault with what is left \(fresh)")
        #expect(try run("/usr/bin/find", [m.path("d0"), "-type", "f"]).stdoutText.split(separator: "\n").count == 100)
        let unmounted = try m.unmount()
        #expect(unmounted.status == 0, "\(unmounted.stderr)")
        #expect(try m.cli.cli(["verify"]).status == 0)
    }

    @Test func aNewVaultGivesBackWhatWasRemoved() throws {
        let m = try MountFixture()
        #expect(VaultSpaceTests.pragma(m.vault, "auto_vacuum") == 2)
        try VaultSpaceTests.expectSpaceGivenBack(m)
    }

    /// A vault made before auto_vacuum (the fixture of format 7) is converted the first time
    /// it has space to give back, and is read as before by every command.
    @Test func anOlderVaultIsConvertedWhenItHasSpaceToGiveBack() throws {
        let directory = NSTemporaryDirectory() + "keychainfs-space-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let vault = directory + "/v7.vault"
        try FileManager.default.copyItem(atPath: fixtures + "/v7.vault", toPath: vault)
        #expect(VaultSpaceTests.pragma(vault, "auto_vacuum") == 0)
        let m = try MountFixture(create: false, passphrase: "fixture passphrase", vault: vault)
        try VaultSpaceTests.expectSpaceGivenBack(m)
        #expect(VaultSpaceTests.pragma(vault, "auto_vacuum") == 2)
        #expect(try m.cli.cli(["get", "app/token"]).stdoutText == "ghp_v7FixtureToken")
    }
}
