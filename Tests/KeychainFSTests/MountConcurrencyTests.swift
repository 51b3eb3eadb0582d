import Foundation
import Glibc
import Testing

/// Eight processes at once on overlapping files and directories, and the CLI beside them.
@Suite(.tags(.mount, .slow)) struct MountConcurrencyTests {
    static let worker = """
        import errno, hashlib, os, random, sys
        root, me, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
        rng = random.Random(int(me) * 7919)
        expected = {errno.ENOENT, errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR, errno.ENOTDIR, errno.EINVAL}
        names = ['a', 'b', 'c', 'd', 'e']
        def path():
            parts = [rng.choice(names) for _ in range(rng.randint(1, 2))]
            return os.path.join(root, *parts)
        # One length for every value: as on tmpfs, the writers of one file share its content, so
        # two writing it at once leave the later write over the earlier one, which is one whole
        # value only when neither is longer (a shorter one would leave the other's tail).
        def value(n):
            body = ('%s-%d-' % (me, n)).encode().ljust(16, b'-') + bytes(rng.randrange(256) for _ in range(920))
            return body + hashlib.sha256(body).hexdigest().encode()
        unexpected = 0
        for n in range(steps):
            op = rng.randrange(10)
            p = path()
            try:
                if op < 4:
                    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                    data = memoryview(value(n))
                    while data:
                        data = data[os.write(fd, data):]
                    os.close(fd)
                elif op < 6:
                    open(p, 'rb').read()
                elif op == 6:
                    os.rename(p, path())
                elif op == 7:
                    os.unlink(p)
                elif op == 8:
                    os.mkdir(p, 0o700)
                else:
                    os.rmdir(p)
            except OSError as e:
                if e.errno not in expected:
                    unexpected += 1
                    print('unexpected', os.strerror(e.errno), op, p, file=sys.stderr)
        sys.exit(1 if unexpected else 0)
        """

    static let check = """
        import hashlib, os, sys
        bad = 0
        for dirpath, dirs, files in os.walk(sys.argv[1]):
            for f in files:
                data = open(os.path.join(dirpath, f), 'rb').read()
                body, digest = data[:-64], data[-64:]
                if len(data) < 64 or hashlib.sha256(body).hexdigest().encode() != digest:
                    bad += 1
                    print('not one whole value:', os.path.join(dirpath, f), len(data))
        sys.exit(1 if bad else 0)
        """

    /// With the session loop's busy polling (the default) and without it.
    @Test(arguments: [[], ["--busy-poll-us", "0"]])
    func eightProcessesAndTheCommandLineAtOnce(_ polling: [String]) throws {
        let m = try MountFixture()
        if !polling.isEmpty {
            try m.unmount()
            let mounted = try m.mount(extra: polling)
            #expect(mounted.exitStatus == .success, "\(mounted.stderr)")
        }
        #expect(mkdir(m.path("shared"), 0o700) == 0)
        let workers = try (1...8).map { id -> Process in
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            p.arguments = ["-c", MountConcurrencyTests.worker, m.path("shared"), String(id), "500"]
            p.standardOutput = FileHandle.nullDevice
            try p.run()
            return p
        }
        // A CLI `set` loop beside the mount, on its own dictionary.
        let cli = try run("/bin/sh", ["-c", """
            for i in $(seq 1 15); do "$0" set --vault "$1" --passphrase-file "$2" "cli/k$((i % 5))" "cli-$i" || exit 1; done
            """, keychainfsBinary, m.vault, m.cli.passphraseFile])
        #expect(cli.status == 0, "\(cli.stderr)")
        for worker in workers {
            worker.waitUntilExit()
            #expect(worker.terminationStatus == 0, "a worker met an unexpected errno (or crashed)")
        }
        let check = try run("/usr/bin/python3", ["-c", MountConcurrencyTests.check, m.path("shared")])
        #expect(check.status == 0, "\(check.stdoutText)")
        for k in 0..<5 {
            let last = (1...15).last { $0 % 5 == k }!
            #expect(try m.cli.cli(["get", "cli/k\(k)"]).stdoutText == "cli-\(last)")
        }
        #expect(try m.cli.cli(["verify"]).exitStatus == .success)
        let pid = try status(m.mountpoint).pid
        #expect(kill(pid, 0) == 0, "the daemon died")
    }

    /// The busy polling ends: once a program stops asking, the daemon sleeps. Its CPU time over
    /// the second after a burst of requests stays far below the second it would spend polling.
    @Test func anIdleDaemonSleeps() throws {
        let m = try MountFixture()
        #expect(mkdir(m.path("d"), 0o700) == 0)
        for i in 0..<200 { #expect(writeFile(m.path("d/s\(i)"), Array("v\(i)".utf8)) == 0) }
        for i in 0..<200 { #expect(readFile(m.path("d/s\(i)")) == Array("v\(i)".utf8)) }
        let pid = try status(m.mountpoint).pid
        func cpuTicks() -> Int? {
            // utime and stime, fields 14 and 15 of /proc/PID/stat (after the command's parentheses).
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = text.lastIndex(of: ")") else { return nil }
            let fields = text[text.index(after: close)...].split(separator: " ")
            guard fields.count > 13, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
            return user + system
        }
        let before = try #require(cpuTicks())
        // A window to measure over, not a condition to wait for.
        usleep(1_000_000)
        let after = try #require(cpuTicks())
        let ticksPerSecond = sysconf(Int32(_SC_CLK_TCK))
        #expect(after - before < ticksPerSecond / 10, "the daemon used \(after - before) ticks of \(ticksPerSecond) in an idle second")
    }

    @Test func busyPollingTakesMicrosecondsWithinBounds() throws {
        let m = try MountFixture()
        try m.unmount()
        for bad in ["-1", "1000001", "soon"] {
            let refused = try m.mount(extra: ["--busy-poll-us", bad])
            #expect(refused.exitStatus == .usage, "--busy-poll-us \(bad): \(refused.stderr)")
        }
        #expect(try m.mount(extra: ["--busy-poll-us", "1000"]).exitStatus == .success)
        #expect(writeFile(m.path("x"), [1, 2]) == 0)
        #expect(readFile(m.path("x")) == [1, 2])
    }
}
