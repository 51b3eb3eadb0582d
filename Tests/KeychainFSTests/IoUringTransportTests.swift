import Foundation
import Glibc
import Testing

/// The fuse module's `enable_uring` parameter (root may write it): set for a test and put back
/// as it was after, whatever happens. Only INIT reads it, so mounts made meanwhile by other
/// tests on /dev/fuse (the default transport) are not affected; a whole run on io_uring
/// (`KEYCHAINFS_TRANSPORT=io-uring`, scripts/test --transport io-uring) keeps it on throughout.
enum KernelIoUring {
    static let parameter = "/sys/module/fuse/parameters/enable_uring"

    static var exists: Bool { access(parameter, W_OK) == 0 }

    /// The whole run serves every mount through io_uring: nothing may switch it off meanwhile.
    static var wholeRunOnIoUring: Bool { ProcessInfo.processInfo.environment["KEYCHAINFS_TRANSPORT"] == "io-uring" }

    static func with<T>(enabled: Bool, _ body: () throws -> T) throws -> T {
        let before = procText(parameter).trimmingCharacters(in: .whitespacesAndNewlines)
        try set(enabled ? "Y" : "N")
        defer { try? set(before) }
        return try body()
    }

    private static func set(_ value: String) throws {
        let fd = open(parameter, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { throw FixtureError("cannot open \(parameter): errno \(errno)") }
        defer { close(fd) }
        guard write(fd, value, value.utf8.count) == value.utf8.count else { throw FixtureError("cannot write \(parameter): errno \(errno)") }
    }
}

/// FUSE over io_uring (`--transport io-uring`): the same file system as on /dev/fuse, through
/// the kernel's ring queues. The suites of the mount's semantics, lock and unmount run on it
/// too with `KEYCHAINFS_TRANSPORT=io-uring` (scripts/test --transport io-uring); these are the
/// checks of the transport itself.
@Suite(.serialized, .tags(.mount), .enabled(if: KernelIoUring.exists)) struct IoUringTransportTests {
    static let ioUring = ["--transport", "io-uring"]

    @Test func statusSaysWhichTransportServesTheMount() throws {
        try KernelIoUring.with(enabled: true) {
            let ring = try MountFixture(extra: Self.ioUring)
            #expect(try status(ring.mountpoint).field("transport") == "io-uring")
            let chosen = try MountFixture(extra: ["--transport", "auto"])
            #expect(try status(chosen.mountpoint).field("transport") == "io-uring")
            let device = try MountFixture(extra: ["--transport", "dev-fuse"])
            #expect(try status(device.mountpoint).field("transport") == "dev-fuse")
            let text = try run(keychainfsBinary, ["status", ring.mountpoint]).stdoutText
            #expect(text.contains("transport: io-uring"), "\(text)")
        }
    }

    /// Forced, io_uring is refused with the reason when the kernel does not offer it; auto
    /// falls back to /dev/fuse. (Not in a run that serves every mount by io_uring: switching
    /// the parameter off would refuse the other tests' mounts.)
    @Test(.enabled(if: !KernelIoUring.wholeRunOnIoUring))
    func ioUringIsRefusedWhenTheKernelDoesNotOfferItAndAutoFallsBack() throws {
        try KernelIoUring.with(enabled: false) {
            let f = try CLIFixture()
            let mountpoint = f.directory + "/mnt"
            try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
            let refused = try run(keychainfsBinary, ["mount", "--vault", f.vault, "--passphrase-file", f.passphraseFile] + Self.ioUring + [mountpoint])
            #expect(refused.exitStatus == .mountFailure)
            #expect(refused.stderr.contains("enable_uring"), "\(refused.stderr)")
            #expect(!isMounted(mountpoint))
            let chosen = try MountFixture(extra: ["--transport", "auto"])
            #expect(try status(chosen.mountpoint).field("transport") == "dev-fuse")
            #expect(writeFile(chosen.path("item"), Array("on /dev/fuse".utf8)) == 0)
            #expect(readFile(chosen.path("item")) == Array("on /dev/fuse".utf8))
        }
    }

    /// Every operation of the descriptor and metadata script, through the ring, gives what
    /// tmpfs gives; then the times script.
    @Test func everyOperationBehavesAsOnTmpfs() throws {
        try KernelIoUring.with(enabled: true) {
            let m = try MountFixture(extra: Self.ioUring)
            #expect(try status(m.mountpoint).field("transport") == "io-uring")
            try expectSameOutputAsTmpfs(m, script: TmpfsComparisonTests.script, tmpfsArguments: ["rlimit"], mountArguments: ["none"],
                                        atLeast: 20)
            try expectSameOutputAsTmpfs(m, script: TmpfsComparisonTests.timesScript, atLeast: 13)
            #expect(try m.cli.cli(["verify"]).status == 0)
        }
    }

    /// Closes and fsyncs are answered from the group commit's thread, not the session's: those
    /// answers reach their ring entries too (eight writers at once, each close waiting).
    @Test func answersFromOtherThreadsGoBackThroughTheRing() throws {
        try KernelIoUring.with(enabled: true) {
            let m = try MountFixture(extra: Self.ioUring)
            // Threads of one process: each writes, fsyncs and closes its own files.
            let script = """
                import os, sys, threading
                d = sys.argv[1]
                def writer(w):
                    for i in range(1, 26):
                        fd = os.open(f'{d}/w{w}-{i}', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                        os.write(fd, f'content {w} {i}\\n'.encode())
                        os.fsync(fd)
                        os.close(fd)
                threads = [threading.Thread(target=writer, args=(w,)) for w in range(1, 9)]
                for t in threads: t.start()
                for t in threads: t.join()
                """
            let written = try run("/usr/bin/python3", ["-c", script, m.mountpoint])
            #expect(written.status == 0, "\(written.stderr)")
            for w in 1...8 {
                for i in [1, 13, 25] {
                    #expect(readFile(m.path("w\(w)-\(i)")) == Array("content \(w) \(i)\n".utf8))
                }
            }
            #expect(listing(m.mountpoint).count == 200)
            #expect(try status(m.mountpoint).field("transport") == "io-uring")
        }
    }

    /// A name and a content written and read through the ring's entries (the kernel copies
    /// requests and answers through them) are gone from the daemon once the mount is locked:
    /// each request is wiped once copied out of its entry, each answer once the kernel took it.
    @Test func noPlaintextStaysInTheRingsEntries() throws {
        try KernelIoUring.with(enabled: true) {
            let m = try MountFixture(extra: Self.ioUring)
            let name = "ringname-" + UUID().uuidString.prefix(12)
            let content = "ringcontent-" + UUID().uuidString
            #expect(writeFile(m.path(String(name)), Array(content.utf8)) == 0)
            #expect(readFile(m.path(String(name))) == Array(content.utf8))
            #expect(listing(m.mountpoint).contains(String(name)))
            let pid = try status(m.mountpoint).pid
            #expect(try run(keychainfsBinary, ["lock", m.mountpoint]).exitStatus == .success)
            let found = processMemoryHits(pid, [Array(name.utf8), Array(content.utf8)])
            #expect(found.isEmpty, "found after a lock: \(found.sorted().map { ["name", "content"][$0] })")
            // The scan sees them when they are there: an open item holds its content.
            #expect(try run(keychainfsBinary, ["unlock", "--passphrase-file", m.cli.passphraseFile, m.mountpoint]).exitStatus == .success)
            let fd = open(m.path(String(name)), O_RDONLY | O_CLOEXEC)
            #expect(fd >= 0)
            defer { close(fd) }
            var byte: UInt8 = 0
            #expect(read(fd, &byte, 1) == 1)
            #expect(processMemoryHits(pid, [Array(content.utf8)]) == [0])
        }
    }

    /// SIGTERM or SIGINT ends the daemon and its mount as on /dev/fuse. The unmount waits for
    /// every request the ring holds, which only the ring's end lets go once its thread stops
    /// serving: the ring ends first (before that fix the daemon hung in the unmount for good).
    @Test(arguments: [SIGTERM, SIGINT])
    func aSignalEndsTheDaemonAndItsMount(signal: Int32) throws {
        try KernelIoUring.with(enabled: true) {
            let f = try CLIFixture()
            let mountpoint = f.directory + "/mnt"
            try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
            let daemon = try ForegroundDaemon(f, mountpoint: mountpoint, extra: Self.ioUring)
            #expect(try status(mountpoint).field("transport") == "io-uring")
            #expect(writeFile(mountpoint + "/item", Array("kept".utf8)) == 0)
            kill(daemon.process.processIdentifier, signal)
            #expect(daemon.exitStatus() == 0)
            #expect(!isMounted(mountpoint))
            #expect(try f.cli(["get", "item"]).stdoutText == "kept")
        }
    }

    /// A daemon killed with SIGKILL has ended its connection by the time it can be reaped, as on
    /// /dev/fuse: a stat of the dead mount answers ENOTCONN, never ECONNABORTED (a request
    /// queued on a connection the kernel ends later). The ring's entries and its poll of
    /// /dev/fuse kept the device open past the daemon's exit in about 1 of 5 kills (FUSERing's
    /// comment says why), so twenty kills, each checked at once.
    @Test func aKilledDaemonsMountAnswersNotConnectedAtOnce() throws {
        try KernelIoUring.with(enabled: true) {
            let f = try CLIFixture()
            let mountpoint = f.directory + "/mnt"
            try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
            var answers: [Int32] = []
            for _ in 0..<20 {
                let daemon = try ForegroundDaemon(f, mountpoint: mountpoint, extra: Self.ioUring)
                #expect(try status(mountpoint).field("transport") == "io-uring")
                kill(daemon.process.processIdentifier, SIGKILL)
                #expect(daemon.exitStatus() != nil)
                var st = stat()
                answers.append(errnoOf { stat(mountpoint, &st) })
                #expect(try run("/bin/fusermount3", ["-u", "-z", mountpoint]).status == 0)
            }
            #expect(answers.allSatisfy { $0 == ENOTCONN }, "\(answers)")
        }
    }

    /// A request held in its entry (waiting for a confirmation) whose caller is killed: the
    /// kernel's INTERRUPT comes by /dev/fuse while the answer is due through the ring. The
    /// mount goes on serving others meanwhile, and ends cleanly.
    @Test func aKilledCallerOfAHeldRequestLeavesTheRingServing() throws {
        try KernelIoUring.with(enabled: true) {
            let s = try AccessRuleMountTests.Scene(mountArguments: Self.ioUring + ["--confirm-with", "exec sleep 3", "--confirm-timeout", "2"])
            #expect(try status(s.m.mountpoint).field("transport") == "io-uring")
            try s.allow(["app", "--exe", s.reader, "--confirm"])
            let waiting = try Process.run(URL(fileURLWithPath: s.reader), arguments: [s.m.path("app/token")])
            usleep(300_000)
            kill(waiting.processIdentifier, SIGKILL)
            waiting.waitUntilExit()
            // Others are served while the held request waits for its dialog's timeout.
            #expect(readFile(s.m.path("open/plain")) == Array("public".utf8))
            #expect(writeFile(s.m.path("open/new"), Array("new".utf8)) == 0)
            #expect(try s.m.unmount().exitStatus == .success)
            #expect(!isMounted(s.m.mountpoint))
        }
    }
}
