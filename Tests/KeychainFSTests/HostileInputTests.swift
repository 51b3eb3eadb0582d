import CSQLite
import Foundation
import Glibc
import Testing

/// Bad input through the mount and the CLI: each gets a clear errno or message and loses nothing.
@Suite(.tags(.mount, .slow)) struct HostileInputTests {
    @Test func oddNamesThroughTheMount() throws {
        let m = try MountFixture()
        let names = ["line\nbreak", "tab\there", "bell\u{7}", "space at end ", "-dash", "ünïcødé ✓", String(repeating: "é", count: 127) + "x"]
        for name in names {
            #expect(writeFile(m.path(name), Array(name.utf8)) == 0, "\(name.debugDescription)")
        }
        #expect(Set(listing(m.mountpoint)) == Set(names))
        for name in names { #expect(readFile(m.path(name)) == Array(name.utf8)) }
        #expect(errnoOf { mkdir(m.path(String(repeating: "n", count: 256)), 0o700) } == ENAMETOOLONG)
        #expect(errnoOf { mkdir(m.path("."), 0o700) } == EEXIST)
        #expect(errnoOf { rmdir(m.path("..")) } != 0)
        // The CLI lists them too (one per line; a newline in a name shows as one).
        #expect(try m.cli.cli(["ls"]).exitStatus == .success)
        #expect(try m.cli.cli(["get", "tab\there"]).stdoutText == "tab\there")
    }

    @Test func tenThousandEntriesInOneDictionaryAndSixtyFourLevels() throws {
        let m = try MountFixture()
        let script = """
            import os, sys
            d = sys.argv[1]
            os.mkdir(d)
            for i in range(10000):
                fd = os.open(os.path.join(d, 'entry%05d' % i), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                os.write(fd, b'%d' % i)
                os.close(fd)
            """
        let made = try run("/usr/bin/python3", ["-c", script, m.path("wide")])
        #expect(made.status == 0, "\(made.stderr)")
        let entries = listing(m.path("wide"))
        #expect(entries.count == 10_000)
        #expect(entries.first == "entry00000" && entries.last == "entry09999")
        #expect(readFile(m.path("wide/entry04567")) == Array("4567".utf8))
        let deep = (1...64).map { "level\($0)" }.joined(separator: "/")
        #expect(try sh("mkdir -p \(m.path(deep)) && echo bottom > \(m.path(deep))/item").status == 0)
        #expect(readFile(m.path(deep + "/item")) == Array("bottom\n".utf8))
        #expect(try m.cli.cli(["get", deep + "/item"]).stdoutText == "bottom\n")
        #expect(try m.cli.cli(["verify"]).exitStatus == .success)
    }

    @Test func tamperedVaultReadsGiveEIONeverOtherContent() throws {
        let f = try CLIFixture()
        var values: [String: String] = [:]
        for i in 0..<12 {
            let value = "value-\(i)-" + String(repeating: "\(i % 10)", count: 20 + i * 37)
            values["d\(i % 3)/item\(i)"] = value
            #expect(try f.cli(["set", "d\(i % 3)/item\(i)", value]).exitStatus == .success)
        }
        var db: OpaquePointer?
        #expect(sqlite3_open(f.vault, &db) == SQLITE_OK)
        #expect(sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", nil, nil, nil) == SQLITE_OK)
        sqlite3_close(db)
        let original = try Data(contentsOf: URL(fileURLWithPath: f.vault))
        let mountpoint = f.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        var damagedReads = 0
        var stride = max(1, original.count / 24)
        stride -= stride % 7 == 0 ? 1 : 0
        for offset in Swift.stride(from: 101, to: original.count, by: stride) {
            var damaged = original
            damaged[offset] ^= 0x5A
            try damaged.write(to: URL(fileURLWithPath: f.vault))
            for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: f.vault + suffix) }
            // Each round puts the original back: older than what the last round's unmount recorded.
            let mounted = try run(keychainfsBinary, ["mount", "--vault", f.vault, "--passphrase-file", f.passphraseFile,
                                                     "--accept-rollback", mountpoint])
            if mounted.exitStatus != .success {
                // Refusing the whole vault is allowed, with a clear line (header or key slot damage).
                // One line: its newline at the end and no other.
                #expect(mounted.stderr.hasPrefix("keychainfs: ") && mounted.stderr.hasSuffix("\n")
                        && !mounted.stderr.dropFirst(12).dropLast().contains("\n"), "\(mounted.stderr)")
                continue
            }
            for (path, value) in values {
                let fd = open(mountpoint + "/" + path, O_RDONLY | O_CLOEXEC)
                if fd < 0 {
                    #expect(errno == EIO || errno == ENOENT, "offset \(offset): open \(path) gave errno \(errno)")
                    damagedReads += 1
                    continue
                }
                var buffer = [UInt8](repeating: 0, count: 4096)
                let n = read(fd, &buffer, buffer.count)
                if n < 0 {
                    #expect(errno == EIO, "offset \(offset): read \(path) gave errno \(errno)")
                    damagedReads += 1
                } else {
                    #expect(Array(buffer[..<n]) == Array(value.utf8), "offset \(offset): \(path) returned different content")
                }
                close(fd)
            }
            #expect(try run(keychainfsBinary, ["unmount", mountpoint]).exitStatus == .success)
        }
        try original.write(to: URL(fileURLWithPath: f.vault))
        #expect(damagedReads > 0, "no sampled offset hit a record")
    }

    @Test func swappedAndDeletedRowsThroughTheMountAndVerifyNamesThem() throws {
        let f = try CLIFixture()
        #expect(try f.cli(["set", "app/token", "token-value"]).exitStatus == .success)
        #expect(try f.cli(["set", "app/pw", "password-value"]).exitStatus == .success)
        #expect(try f.cli(["set", "other/keep", "undamaged"]).exitStatus == .success)
        var db: OpaquePointer?
        #expect(sqlite3_open(f.vault, &db) == SQLITE_OK)
        // app is node 2, token 3, pw 4: swap the two contents.
        #expect(sqlite3_exec(db, """
            CREATE TEMP TABLE saved AS SELECT id, content FROM nodes WHERE id IN (3, 4);
            UPDATE nodes SET content = (SELECT content FROM saved WHERE id = 4) WHERE id = 3;
            UPDATE nodes SET content = (SELECT content FROM saved WHERE id = 3) WHERE id = 4;
            """, nil, nil, nil) == SQLITE_OK)
        sqlite3_close(db)
        let verify = try f.cli(["verify"])
        #expect(verify.exitStatus == .integrityFailure)
        #expect(verify.stderr.contains("app/token: content failed authentication"))
        #expect(verify.stderr.contains("app/pw: content failed authentication"))
        let mountpoint = f.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        #expect(try run(keychainfsBinary, ["mount", "--vault", f.vault, "--passphrase-file", f.passphraseFile, mountpoint]).exitStatus == .success)
        defer { _ = try? run(keychainfsBinary, ["unmount", mountpoint]) }
        #expect(errnoOf { open(mountpoint + "/app/token", O_RDONLY) } == EIO)
        #expect(errnoOf { open(mountpoint + "/app/pw", O_RDONLY) } == EIO)
        #expect(readFile(mountpoint + "/other/keep") == Array("undamaged".utf8))
        // A deleted row: its dictionary's sealed entry count no longer matches.
        #expect(sqlite3_open(f.vault, &db) == SQLITE_OK)
        #expect(sqlite3_exec(db, "DELETE FROM nodes WHERE id = 4", nil, nil, nil) == SQLITE_OK)
        sqlite3_close(db)
        // Listing it fails (opendir only checks the dictionary; the first read lists).
        if let dir = opendir(mountpoint + "/app") {
            errno = 0
            while readdir(dir) != nil {}
            #expect(errno == EIO)
            closedir(dir)
        } else {
            Issue.record("opendir failed: \(errno)")
        }
        let after = try f.cli(["verify"])
        #expect(after.stderr.contains("app: 2 entries recorded but 1 found"))
    }
}
