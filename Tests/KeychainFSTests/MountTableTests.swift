import Foundation
import Glibc
import Testing

/// The mount as the system's own tools see it: named by its vault in the mount table, and a
/// vault free to mount again as soon as its mount is gone (mount(8)'s side: MountHelperTests).
@Suite(.tags(.mount, .slow)) struct MountTableTests {
    /// `findmnt -S VAULT` and `umount VAULT` find a mount made by `keychainfs mount`, whose vault
    /// path has a space (escaped by the kernel as \040) and a comma (libfuse's separator).
    @Test func theVaultNamesTheMountForFindmntAndUmount() throws {
        let base = NSTemporaryDirectory() + "keychainfs-named-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: base) }
        let m = try MountFixture(vault: base + "/a vault, named/test.vault")
        #expect(mountSource(m.mountpoint) == m.vault.replacingOccurrences(of: " ", with: "\\040"))
        let found = try run("/usr/bin/findmnt", ["-n", "-o", "TARGET,FSTYPE", "-S", m.vault])
        #expect(found.stdoutText == m.mountpoint + " fuse.keychainfs\n", "\(found.stdoutText) \(found.stderr)")
        let pid = try status(m.mountpoint).pid
        let unmounted = try run("/bin/umount", [m.vault])
        #expect(unmounted.status == 0, "\(unmounted.stderr)")
        #expect(!isMounted(m.mountpoint))
        #expect(eventually(within: 30) { kill(pid, 0) != 0 })
    }

    /// `keychainfs mount` is a command a person types: it keeps saying what it mounted, unless
    /// asked not to (`--quiet`, what the mount(8) form implies).
    @Test func keychainfsMountSaysWhatItMountedUnlessQuiet() throws {
        let m = try MountFixture()
        try m.unmount()
        let said = try m.mount()
        #expect(said.exitStatus == .success && said.stderr == "mounted \(m.vault) at \(m.mountpoint)\n", "\(said.stderr)")
        try m.unmount()
        let quiet = try m.mount(extra: ["--quiet"])
        #expect(quiet.exitStatus == .success && quiet.stdoutText.isEmpty && quiet.stderr.isEmpty, "\(quiet.stderr)")
    }

    /// A mount right after `umount`/`fusermount3 -u` waits for the previous daemon, still
    /// storing the files written, and mounts; what was written is all there.
    @Test func aMountRightAfterAnUnmountWaitsForTheEndingDaemon() throws {
        let m = try MountFixture()
        for round in 1...6 {
            for file in 1...50 { #expect(writeFile(m.path("f\(file)"), Array("\(round).\(file)".utf8)) == 0) }
            let unmounted = round % 2 == 0 ? try run("/bin/umount", [m.mountpoint]) : try run("/bin/fusermount3", ["-u", m.mountpoint])
            #expect(unmounted.status == 0, "\(unmounted.stderr)")
            let mounted = try m.mount()
            try #require(mounted.exitStatus == .success, "round \(round): \(mounted.stderr)")
            #expect(readFile(m.path("f50")) == Array("\(round).50".utf8))
        }
    }

    /// A vault that a live mount serves is refused at once, whatever the wait allows.
    @Test func aVaultAnotherMountServesIsRefusedAtOnce() throws {
        let m = try MountFixture()
        let second = m.cli.directory + "/second"
        try FileManager.default.createDirectory(atPath: second, withIntermediateDirectories: true)
        let started = Date()
        let refused = try run(keychainfsBinary, ["mount", "--vault", m.vault, "--passphrase-file", m.cli.passphraseFile,
                                                 "--remount-wait", "1m", second])
        #expect(refused.exitStatus == .vaultBusy)
        #expect(refused.stderr == "keychainfs: \(m.vault): this vault is already mounted\n", "\(refused.stderr)")
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(!isMounted(second))
        #expect(isMounted(m.mountpoint))
    }
}
