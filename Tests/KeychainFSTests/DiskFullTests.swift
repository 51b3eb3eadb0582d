import Foundation
import Testing

/// A small tmpfs of our own, so "disk full" is real and not simulated.
final class SmallFilesystem {
    let mountpoint: String

    init(size: String) throws {
        mountpoint = NSTemporaryDirectory() + "keychainfs-small-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let result = try run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(size),mode=0700", "tmpfs", mountpoint])
        guard result.status == 0 else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "mount tmpfs failed (root needed): \(result.stderr)"])
        }
    }

    deinit {
        _ = try? run("/bin/umount", ["-l", mountpoint])
        try? FileManager.default.removeItem(atPath: mountpoint)
    }
}

@Suite(.tags(.mount)) struct DiskFullTests {
    @Test func fullDiskFailsClearlyKeepsEarlierItemsAndRecovers() throws {
        let small = try SmallFilesystem(size: "800k")
        let f = try CLIFixture(create: false)
        let vault = small.mountpoint + "/test.vault"
        func cli(_ args: [String], stdin: Data? = nil) throws -> RunResult {
            var a = args
            a.insert(contentsOf: ["--vault", vault, "--passphrase-file", f.passphraseFile], at: 1)
            return try run(keychainfsBinary, a, stdin: stdin)
        }
        #expect(try cli(["init", "--kdf", "interactive"]).exitStatus == .success)
        #expect(try cli(["set", "keep/first", "the first value"]).exitStatus == .success)

        // Fill the rest of the filesystem with a plain file, then try to store a large item.
        let filler = small.mountpoint + "/filler"
        _ = try run("/bin/dd", ["if=/dev/zero", "of=\(filler)", "bs=4k"])
        let full = try cli(["set", "keep/big"], stdin: Data(repeating: 0x5A, count: 300_000))
        #expect(full.exitStatus == .storage)
        #expect(full.stderr.contains("no space left"), "\(full.stderr)")
        #expect(try cli(["get", "keep/first"]).stdoutText == "the first value")
        #expect(try cli(["get", "keep/big"]).exitStatus == .notFound)

        try FileManager.default.removeItem(atPath: filler)
        let after = try cli(["set", "keep/big"], stdin: Data(repeating: 0x5A, count: 300_000))
        #expect(after.exitStatus == .success, "\(after.stderr)")
        #expect(try cli(["get", "keep/big"]).stdout == Data(repeating: 0x5A, count: 300_000))
        #expect(try cli(["verify"]).exitStatus == .success)
    }
}

@Suite(.tags(.mount)) struct MountDiskFullTests {
    /// A new vault alone on a 700 KiB tmpfs, and an empty mountpoint for it.
    private func vaultOnASmallFilesystem() throws -> (SmallFilesystem, CLIFixture, vault: String, mountpoint: String) {
        let small = try SmallFilesystem(size: "700k")
        let f = try CLIFixture(create: false)
        let vault = small.mountpoint + "/test.vault"
        let mountpoint = f.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let created = try run(keychainfsBinary, ["init", "--vault", vault, "--passphrase-file", f.passphraseFile, "--kdf", "interactive"])
        guard created.exitStatus == .success else { throw FixtureError("init failed: \(created.stderr)") }
        return (small, f, vault, mountpoint)
    }

    @Test func aFullDiskFailsTheCloseKeepsOldContentAndTheMountServesOn() throws {
        let (small, f, vault, mountpoint) = try vaultOnASmallFilesystem()
        #expect(try run(keychainfsBinary, ["mount", "--vault", vault, "--passphrase-file", f.passphraseFile, mountpoint]).exitStatus == .success)
        defer { _ = try? run(keychainfsBinary, ["unmount", mountpoint]) }
        #expect(writeFile(mountpoint + "/kept", Array("the old value".utf8)) == 0)

        let filler = small.mountpoint + "/filler"
        _ = try run("/bin/dd", ["if=/dev/zero", "of=\(filler)", "bs=4k"])
        // The shell's own `echo >` sees the failure of its close.
        let echo = try sh("head -c 400000 /dev/zero | tr '\\\\0' x > \(mountpoint)/kept")
        #expect(echo.status != 0)
        #expect(writeFile(mountpoint + "/kept", [UInt8](repeating: 0x78, count: 400_000)) == ENOSPC)
        #expect(readFile(mountpoint + "/kept") == Array("the old value".utf8))
        #expect(listing(mountpoint) == ["kept"])

        try FileManager.default.removeItem(atPath: filler)
        #expect(writeFile(mountpoint + "/kept", [UInt8](repeating: 0x78, count: 400_000)) == 0)
        #expect(readFile(mountpoint + "/kept") == [UInt8](repeating: 0x78, count: 400_000))
    }

    /// An unmount is a last close for every open file; a store that fails then has no caller
    /// left to hear of it, so the daemon's log says so (the errno, no name), and the vault keeps
    /// the content stored before.
    @Test func aStoreThatFailsAtUnmountIsLogged() throws {
        let (small, f, vault, mountpoint) = try vaultOnASmallFilesystem()
        let logFile = f.directory + "/daemon.stderr"
        let daemon = try ForegroundDaemon(f, mountpoint: mountpoint, vault: vault, standardError: logFile)
        let name = "UNSTORED-" + UUID().uuidString
        #expect(writeFile(mountpoint + "/" + name, Array("the old value".utf8)) == 0)
        let writer = try HeldDescriptor(mountpoint + "/" + name, "O_WRONLY")
        #expect(writer.write([UInt8](repeating: 0x78, count: 400_000)) == 0)
        _ = try run("/bin/dd", ["if=/dev/zero", "of=\(small.mountpoint)/filler", "bs=4k"])
        kill(daemon.process.processIdentifier, SIGTERM)
        #expect(daemon.exitStatus() == 0)
        let log = procText(logFile)
        #expect(log.contains("\(mountpoint): a write still open at unmount could not be stored and is lost: No space left on device (errno 28)"), "\(log)")
        #expect(!log.contains(name))
        _ = writer.send("close")
        try FileManager.default.removeItem(atPath: small.mountpoint + "/filler")
        let stored = try run(keychainfsBinary, ["get", "--vault", vault, "--passphrase-file", f.passphraseFile, name])
        #expect(stored.stdoutText == "the old value")
    }
}
