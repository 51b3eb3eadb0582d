import CSQLite
import Foundation
import Glibc
import Testing

/// A daemon in the foreground (`-f`), as systemd runs it: our child, so its exit status is ours to see.
final class ForegroundDaemon {
    let process = Process()
    let mountpoint: String

    /// `standardError`: a file to collect what the daemon says there (nothing kept by default).
    init(_ fixture: CLIFixture, mountpoint: String, vault: String? = nil, extra: [String] = [], standardError: String? = nil,
         environment: [String: String] = [:]) throws {
        self.mountpoint = mountpoint
        process.executableURL = URL(fileURLWithPath: keychainfsBinary)
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        process.arguments = ["mount", "-f", "--vault", vault ?? fixture.vault, "--passphrase-file", fixture.passphraseFile] + extra + [mountpoint]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        let errorFile = try standardError.map { path in
            _ = FileManager.default.createFile(atPath: path, contents: nil)
            return try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        }
        process.standardError = errorFile ?? FileHandle.nullDevice
        try process.run()
        try errorFile?.close()
        for _ in 0..<500 where !isMounted(mountpoint) { usleep(10_000) }
        guard isMounted(mountpoint) else { throw FixtureError("foreground daemon did not mount") }
    }

    deinit {
        if process.isRunning { process.terminate() }
        if isMounted(mountpoint) { _ = try? run("/bin/fusermount3", ["-u", "-z", mountpoint]) }
    }

    /// Waits (bounded) for the daemon to exit; its status, or nil if it did not.
    func exitStatus(within seconds: Double = 20) -> Int32? {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        return process.isRunning ? nil : process.terminationStatus
    }
}

@Suite(.tags(.mount, .slow)) struct MountLifecycleTests {
    @Test(arguments: ["keychainfs unmount", "fusermount3 -u", "umount", "SIGTERM", "SIGINT"])
    func everyWayOfUnmountingEndsTheSameWay(method: String) throws {
        let f = try CLIFixture()
        let mountpoint = f.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let daemon = try ForegroundDaemon(f, mountpoint: mountpoint)
        #expect(writeFile(mountpoint + "/item", Array("kept".utf8)) == 0)
        switch method {
        case "keychainfs unmount":
            let result = try run(keychainfsBinary, ["unmount", mountpoint])
            #expect(result.exitStatus == .success, "\(result.stderr)")
            // It returns only after the daemon has exited.
            #expect(!daemon.process.isRunning || daemon.exitStatus(within: 0.5) != nil)
        case "fusermount3 -u":
            #expect(try run("/bin/fusermount3", ["-u", mountpoint]).status == 0)
        case "umount":
            #expect(try run("/bin/umount", [mountpoint]).status == 0)
        case "SIGTERM":
            daemon.process.terminate()
        default:
            kill(daemon.process.processIdentifier, SIGINT)
        }
        #expect(daemon.exitStatus() == 0)
        #expect(!isMounted(mountpoint))
        // Never a dead mount: the directory is an ordinary empty directory again.
        #expect(listing(mountpoint) == [])
        #expect(try f.cli(["get", "item"]).stdoutText == "kept")
    }

    @Test func afterUnmountTheVaultHoldsNoPlaintextAndARemountShowsEverything() throws {
        let m = try MountFixture()
        let canary = "CANARY-" + UUID().uuidString
        let nameCanary = "NAME" + UUID().uuidString.prefix(12)
        #expect(mkdir(m.path(String(nameCanary)), 0o700) == 0)
        #expect(writeFile(m.path("\(nameCanary)/token"), Array(canary.utf8)) == 0)
        let record = try m.unmount()
        #expect(record.exitStatus == .success)
        #expect(!isMounted(m.mountpoint))
        let daemons = try sh("pgrep -f '[k]eychainfs mount.*\(m.mountpoint)' || true").stdoutText
        #expect(daemons.isEmpty, "daemon still running: \(daemons)")
        let bytes = ["", "-wal", "-shm"].compactMap { try? Data(contentsOf: URL(fileURLWithPath: m.vault + $0)) }.reduce(Data(), +)
        #expect(bytes.range(of: Data(canary.utf8)) == nil)
        #expect(bytes.range(of: Data(nameCanary.utf8)) == nil)
        #expect(try m.mount().exitStatus == .success)
        #expect(readFile(m.path("\(nameCanary)/token")) == Array(canary.utf8))
    }

    @Test func aSecondMountOfTheSameVaultIsRefused() throws {
        let m = try MountFixture()
        let other = m.cli.directory + "/mnt2"
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        let second = try run(keychainfsBinary, ["mount", "--vault", m.vault, "--passphrase-file", m.cli.passphraseFile, other])
        #expect(second.exitStatus == .vaultBusy)
        #expect(second.stderr.contains("already mounted"), "\(second.stderr)")
        #expect(!isMounted(other))
        let again = try m.mount()
        #expect(again.exitStatus == .mountFailure)
        #expect(again.stderr.contains("already a mountpoint"), "\(again.stderr)")
    }

    @Test func mountErrorsAreOneClearLineAndLeaveNothingMounted() throws {
        let f = try CLIFixture()
        let mountpoint = f.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let wrong = try f.write("wrong\n", to: "wrong")
        let refused = try run(keychainfsBinary, ["mount", "--vault", f.vault, "--passphrase-file", wrong, mountpoint])
        #expect(refused.exitStatus == .wrongPassphrase)
        #expect(refused.stderr == "keychainfs: wrong passphrase\n")
        #expect(!isMounted(mountpoint))

        let missing = try run(keychainfsBinary, ["mount", "--vault", f.vault, "--passphrase-file", f.passphraseFile, f.directory + "/nope"])
        #expect(missing.exitStatus == .mountFailure)
        #expect(missing.stderr.contains("does not exist"))

        let file = try f.write("x", to: "a-file")
        let notDirectory = try run(keychainfsBinary, ["mount", "--vault", f.vault, "--passphrase-file", f.passphraseFile, file])
        #expect(notDirectory.stderr.contains("is not a directory"))

        FileManager.default.createFile(atPath: mountpoint + "/occupant", contents: Data())
        let notEmpty = try run(keychainfsBinary, ["mount", "--vault", f.vault, "--passphrase-file", f.passphraseFile, mountpoint])
        #expect(notEmpty.exitStatus == .mountFailure)
        #expect(notEmpty.stderr.contains("is not empty"))
        #expect(!isMounted(mountpoint))

        let notMounted = try run(keychainfsBinary, ["unmount", mountpoint])
        #expect(notMounted.exitStatus == .mountFailure)
        #expect(notMounted.stderr.contains("is not a keychainfs mount"))
    }

    @Test func mountingCreatesAMissingVaultAndSaysWhere() throws {
        let f = try CLIFixture(create: false)
        let mountpoint = f.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let result = try run(keychainfsBinary, ["mount", "--vault", f.vault, "--passphrase-file", f.passphraseFile,
                                                "--kdf", "interactive", mountpoint])
        defer { _ = try? run(keychainfsBinary, ["unmount", mountpoint]) }
        #expect(result.exitStatus == .success, "\(result.stderr)")
        #expect(result.stderr.contains("created vault \(f.vault)"))
        var st = stat()
        #expect(stat(f.vault, &st) == 0 && st.st_mode & 0o777 == 0o600)
        // The command returned only once the mount serves: this works right away.
        #expect(writeFile(mountpoint + "/first", Array("1".utf8)) == 0)
        #expect(readFile(mountpoint + "/first") == Array("1".utf8))
    }

    @Test func theCommandLineKeepsWorkingAndItsChangesShowWithinASecond() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("from-mount"), Array("m".utf8)) == 0)
        #expect(try m.cli.cli(["get", "from-mount"]).stdoutText == "m")
        #expect(listing(m.mountpoint) == ["from-mount"])  // the kernel now caches this listing
        #expect(try m.cli.cli(["set", "app/from-cli", "c"]).exitStatus == .success)
        #expect(try m.cli.cli(["set", "from-mount", "changed"]).exitStatus == .success)
        // The kernel's cache lasts 0.5 s; the bound is for a loaded machine, not the claim.
        #expect(eventually(within: 5) { listing(m.mountpoint) == ["app", "from-mount"] })
        #expect(readFile(m.path("app/from-cli")) == Array("c".utf8))
        #expect(eventually(within: 5) { readFile(m.path("from-mount")) == Array("changed".utf8) })
        #expect(try m.cli.cli(["rm", "app/from-cli"]).exitStatus == .success)
        #expect(eventually(within: 5) { errnoOf { open(m.path("app/from-cli"), O_RDONLY) } == ENOENT })
    }
}

@Suite(.tags(.mount)) struct MountBadVaultTests {
    @Test func unusableVaultFilesAreRefusedByMountWithNothingMounted() throws {
        let f = try CLIFixture()
        let mountpoint = f.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        func mount(_ vault: String) throws -> RunResult {
            try run(keychainfsBinary, ["mount", "--vault", vault, "--passphrase-file", f.passphraseFile, mountpoint])
        }
        let directory = f.directory + "/a-directory"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let text = f.directory + "/text"
        FileManager.default.createFile(atPath: text, contents: Data("not a vault\n".utf8))
        let empty = f.directory + "/empty"
        FileManager.default.createFile(atPath: empty, contents: Data())
        for (vault, expected) in [(directory, "it is a directory"), (text, "not an SQLite database"), (empty, "the file is empty")] {
            let result = try mount(vault)
            #expect(result.exitStatus == .unusableVault, "\(vault): \(result.stderr)")
            #expect(result.stderr.contains(expected))
            #expect(!isMounted(mountpoint))
        }
        var db: OpaquePointer?
        #expect(sqlite3_open(f.vault, &db) == SQLITE_OK)
        #expect(sqlite3_exec(db, "PRAGMA user_version = 10", nil, nil, nil) == SQLITE_OK)
        sqlite3_close(db)
        let newer = try mount(f.vault)
        #expect(newer.exitStatus == .unusableVault)
        #expect(newer.stderr.contains("newer than this keychainfs supports"))
        #expect(!isMounted(mountpoint))
    }
}
