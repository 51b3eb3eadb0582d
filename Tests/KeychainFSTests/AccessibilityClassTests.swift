import Foundation
import Glibc
import Testing

/// A vault mounted with the environment given (a host key of its own), unmounted at the end.
final class EnvironmentMount {
    let mountpoint: String

    init(vault: String, passphraseFile: String, directory: String, environment: [String: String]) throws {
        mountpoint = directory + "/mnt-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let mounted = try run(keychainfsBinary, ["mount", "--vault", vault, "--passphrase-file", passphraseFile, "--kdf", "interactive",
                                                 mountpoint], environment: environment)
        guard mounted.exitStatus == .success else { throw FixtureError("mount failed: \(mounted.stderr)") }
    }

    deinit {
        if isMounted(mountpoint) { _ = try? run(keychainfsBinary, ["unmount", mountpoint]) }
        if isMounted(mountpoint) { _ = try? run("/bin/fusermount3", ["-u", "-z", mountpoint]) }
    }
}

@Suite(.tags(.mount, .slow)) struct AccessibilityClassTests {
    @Test func classesThroughTheCommandLine() throws {
        let f = try CLIFixture()
        #expect(try f.cli(["set", "svc/token", "t", "--class", "after-first-unlock"]).exitStatus == .success)
        #expect(try f.cli(["set", "plain", "p"]).exitStatus == .success)
        #expect(try f.cli(["class", "svc/token"]).stdoutText == "after-first-unlock\n")
        #expect(try f.cli(["class", "plain"]).stdoutText == "when-unlocked\n")
        #expect(try f.cli(["class", "plain", "after-first-unlock"]).exitStatus == .success)
        #expect(try f.cli(["class", "plain"]).stdoutText == "after-first-unlock\n")
        #expect(try f.cli(["get", "plain"]).stdoutText == "p")
        let json = try f.cli(["get", "--json", "svc/token"]).stdoutText
        #expect(json.contains("\"class\":\"after-first-unlock\""), "\(json)")

        // A dictionary's default, printed, set, used by set, shown by ls --json, cleared.
        #expect(try f.cli(["class", "svc"]).stdoutText == "inherit (new items get when-unlocked)\n")
        #expect(try f.cli(["class", "svc", "after-first-unlock"]).exitStatus == .success)
        #expect(try f.cli(["class", "svc"]).stdoutText == "after-first-unlock\n")
        #expect(try f.cli(["set", "svc/second", "s"]).exitStatus == .success)
        #expect(try f.cli(["class", "svc/second"]).stdoutText == "after-first-unlock\n")
        let listed = try f.cli(["ls", "--json"]).stdoutText
        #expect(listed.contains("\"defaultClass\":\"after-first-unlock\""), "\(listed)")
        #expect(listed.contains("\"class\":\"after-first-unlock\""), "\(listed)")
        #expect(try f.cli(["class", "svc", "inherit"]).exitStatus == .success)
        #expect(try f.cli(["class", "svc"]).stdoutText == "inherit (new items get when-unlocked)\n")

        // Bad class names: a clear error, status 7, nothing stored or changed.
        let bad = try f.cli(["set", "new", "v", "--class", "sometimes"])
        #expect(bad.exitStatus == .invalidInput)
        #expect(bad.stderr.contains("unknown accessibility class \"sometimes\""), "\(bad.stderr)")
        #expect(bad.stderr.contains("when-unlocked, after-first-unlock, this-device-only"), "\(bad.stderr)")
        #expect(try f.cli(["get", "new"]).exitStatus == .notFound)
        #expect(try f.cli(["class", "plain", "never"]).exitStatus == .invalidInput)
        #expect(try f.cli(["class", "plain"]).stdoutText == "after-first-unlock\n")
        #expect(try f.cli(["class", "plain", "inherit"]).exitStatus == .invalidInput)
        #expect(try f.cli(["verify"]).exitStatus == .success)
    }

    @Test func itemsCreatedThroughTheMountTakeTheNearestDefault() throws {
        let m = try MountFixture(create: true)
        #expect(try m.unmount().exitStatus == .success)
        #expect(try m.cli.cli(["mkdir", "-p", "svc/inner"]).exitStatus == .success)
        #expect(try m.cli.cli(["class", "svc", "after-first-unlock"]).exitStatus == .success)
        #expect(try m.mount().exitStatus == .success)
        #expect(writeFile(m.path("svc/inner/made"), Array("through the mount".utf8)) == 0)
        #expect(writeFile(m.path("top"), Array("top".utf8)) == 0)
        #expect(try m.unmount().exitStatus == .success)
        #expect(try m.cli.cli(["class", "svc/inner/made"]).stdoutText == "after-first-unlock\n")
        #expect(try m.cli.cli(["class", "top"]).stdoutText == "when-unlocked\n")
    }

    /// The issue's proof: after a lock the when-unlocked canary read through the mount is gone
    /// from the daemon's memory, while the after-first-unlock item still reads and takes writes,
    /// and everything else (lookups, listings) answers EACCES.
    @Test func aLockWipesWhenUnlockedItemsAndKeepsAfterFirstUnlockOnes() throws {
        let m = try MountFixture(create: true)
        #expect(try m.unmount().exitStatus == .success)
        #expect(try m.cli.cli(["set", "svc/api/token", "service-token", "--class", "after-first-unlock"]).exitStatus == .success)
        #expect(try m.mount().exitStatus == .success)

        let canary = Array(("CLASS-CANARY-" + UUID().uuidString).utf8)
        #expect(writeFile(m.path("canary"), canary) == 0)
        #expect(readFile(m.path("canary")) == canary)
        let fd = open(m.path("canary"), O_RDONLY | O_CLOEXEC)
        var buffer = [UInt8](repeating: 0, count: canary.count)
        #expect(pread(fd, &buffer, canary.count, 0) == canary.count && buffer == canary)
        #expect(readFile(m.path("svc/api/token")) == Array("service-token".utf8))
        let pid = try status(m.mountpoint).pid
        #expect(processMemoryContains(pid, canary), "scanner did not find the canary in an unlocked daemon")

        #expect(try run(keychainfsBinary, ["lock", m.mountpoint]).exitStatus == .success)
        #expect(try status(m.mountpoint).locked)
        #expect(!processMemoryContains(pid, canary), "a when-unlocked canary found in a locked daemon's memory")
        // The after-first-unlock item: read, written, read again, by path, while locked.
        #expect(try sh("cat '\(m.path("svc/api/token"))'").stdoutText == "service-token")
        #expect(writeFile(m.path("svc/api/token"), Array("rotated while locked".utf8)) == 0)
        #expect(try sh("cat '\(m.path("svc/api/token"))'").stdoutText == "rotated while locked")
        #expect(try sh("printf appended >> '\(m.path("svc/api/token"))'").status == 0)
        #expect(readFile(m.path("svc/api/token")) == Array("rotated while lockedappended".utf8))
        // Everything else: EACCES.
        #expect(errnoOf { open(m.path("canary"), O_RDONLY) } == EACCES)
        #expect(errnoOf { pread(fd, &buffer, canary.count, 0) < 0 ? -1 : 0 } == EACCES)
        #expect(errnoOf { open(m.path("missing"), O_RDONLY) } == EACCES)
        #expect(errnoOf { opendir(m.path("svc")) == nil ? -1 : 0 } == EACCES)
        #expect(errnoOf { opendir(m.mountpoint) == nil ? -1 : 0 } == EACCES)
        #expect(errnoOf { open(m.path("svc/api/new"), O_WRONLY | O_CREAT, 0o600) } == EACCES)
        #expect(errnoOf { mkdir(m.path("svc/d"), 0o700) } == EACCES)
        #expect(!processMemoryContains(pid, canary), "a when-unlocked canary came back while locked")

        #expect(try run(keychainfsBinary, ["unlock", "--passphrase-file", m.cli.passphraseFile, m.mountpoint]).exitStatus == .success)
        #expect(readFile(m.path("canary")) == canary)
        #expect(listing(m.mountpoint).sorted() == ["canary", "svc"])
        close(fd)
        // Unmount forgets it; what was written while locked was stored.
        #expect(try m.unmount().exitStatus == .success)
        #expect(try m.cli.cli(["get", "svc/api/token"]).stdoutText == "rotated while lockedappended")
    }

    @Test func aMountWithoutAfterFirstUnlockItemsServesNothingWhileLocked() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("plain"), Array("p".utf8)) == 0)
        #expect(try run(keychainfsBinary, ["lock", m.mountpoint]).exitStatus == .success)
        #expect(errnoOf { open(m.path("plain"), O_RDONLY) } == EACCES)
    }

    /// A copy of the vault, with its passphrase, opened with another host key file (no TPM, even
    /// on a machine that has one: see TPMHostKeyTests): every other item reads, the this-device-only one is refused with a clear error (CLI) and EACCES (mount).
    @Test func aCopyOnAnotherMachineRefusesThisDeviceOnlyItems() throws {
        let f = try CLIFixture()
        let here = f.directory + "/state-here/keychainfs/host.key"
        let there = f.directory + "/state-there/host.key"
        func cli(_ arguments: [String], hostKey: String, vault: String? = nil) throws -> RunResult {
            var args = arguments
            args.insert(contentsOf: ["--vault", vault ?? f.vault, "--passphrase-file", f.passphraseFile], at: 1)
            return try run(keychainfsBinary, args, environment: ["KEYCHAINFS_HOST_KEY": hostKey, "KEYCHAINFS_TCTI": "none"])
        }
        #expect(try cli(["set", "local", "bound to this machine", "--class", "this-device-only"], hostKey: here).exitStatus == .success)
        #expect(try cli(["set", "shared", "anywhere"], hostKey: here).exitStatus == .success)
        #expect(try cli(["get", "local"], hostKey: here).stdoutText == "bound to this machine")
        var info = stat()
        #expect(stat(here, &info) == 0 && info.st_mode & 0o777 == 0o600 && info.st_size == 32)
        #expect(stat(f.directory + "/state-here/keychainfs", &info) == 0 && info.st_mode & 0o777 == 0o700)
        #expect(stat(f.directory + "/state-here", &info) == 0 && info.st_mode & 0o777 == 0o700)

        let copy = f.directory + "/copy.vault"
        try FileManager.default.copyItem(atPath: f.vault, toPath: copy)
        #expect(try cli(["get", "shared"], hostKey: there, vault: copy).stdoutText == "anywhere")
        let refused = try cli(["get", "local"], hostKey: there, vault: copy)
        #expect(refused.exitStatus == .otherDevice)
        #expect(refused.stderr.contains("local: this item is this-device-only and cannot be read on this machine"), "\(refused.stderr)")
        #expect(refused.stdout.isEmpty)
        // Its class can still be read there (it is not secret); the content cannot.
        #expect(try cli(["class", "local"], hostKey: there, vault: copy).stdoutText == "this-device-only\n")

        do {
            let mount = try EnvironmentMount(vault: copy, passphraseFile: f.passphraseFile, directory: f.directory,
                                             environment: ["KEYCHAINFS_HOST_KEY": there, "KEYCHAINFS_TCTI": "none"])
            #expect(readFile(mount.mountpoint + "/shared") == Array("anywhere".utf8))
            #expect(errnoOf { open(mount.mountpoint + "/local", O_RDONLY) } == EACCES)
        }
        do {
            let mount = try EnvironmentMount(vault: f.vault, passphraseFile: f.passphraseFile, directory: f.directory,
                                             environment: ["KEYCHAINFS_HOST_KEY": here, "KEYCHAINFS_TCTI": "none"])
            #expect(readFile(mount.mountpoint + "/local") == Array("bound to this machine".utf8))
        }
    }
}
