import Foundation
import Glibc
@testable import KeychainFS
import Testing

/// Access rules through real mounts: who reads, who is refused, with what errno, and how fast a
/// change reaches a running mount.
@Suite(.serialized, .tags(.mount, .slow))
struct AccessRuleMountTests {
    /// A mount with `app/token` ("s3cret") and `open/plain`, and a scratch directory of
    /// executables: `bin/reader` (a copy of cat, which the tests allow), `elsewhere/reader` (a
    /// byte-identical copy at another path) and `bin/sh` (a copy of dash, for a process that
    /// waits before it reads).
    final class Scene {
        let m: MountFixture
        let bin: String
        let reader: String
        let copy: String
        let shell: String

        init(mountArguments: [String] = []) throws {
            m = try MountFixture()
            if !mountArguments.isEmpty {
                try m.unmount()
                let again = try m.mount(extra: mountArguments)
                guard again.exitStatus == .success else { throw FixtureError("mount: \(again.stderr)") }
            }
            bin = m.cli.directory + "/bin"
            try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: m.cli.directory + "/elsewhere", withIntermediateDirectories: true)
            reader = bin + "/reader"
            copy = m.cli.directory + "/elsewhere/reader"
            shell = bin + "/sh"
            try copyExecutable("/bin/cat", to: reader)
            try copyExecutable("/bin/cat", to: copy)
            try copyExecutable("/bin/dash", to: shell)
            #expect(mkdir(m.path("app"), 0o700) == 0)
            #expect(mkdir(m.path("open"), 0o700) == 0)
            #expect(writeFile(m.path("app/token"), Array("s3cret".utf8)) == 0)
            #expect(writeFile(m.path("open/plain"), Array("public".utf8)) == 0)
        }

        /// Adds a rule and waits (at most the second a running mount may take) until it
        /// applies: until /bin/cat, which no test admits, is refused `app/token`.
        func allow(_ arguments: [String]) throws {
            let result = try m.cli.cli(["allow"] + arguments)
            #expect(result.exitStatus == .success, "\(result.stderr)")
            let applied = eventually(within: 1) { (try? run("/bin/cat", [m.path("app/token")]).status) != 0 }
            #expect(applied, "the rule did not apply within a second")
        }

        /// `program ARGS` run as its own process: its exit status and standard error.
        func attempt(_ program: String, _ arguments: [String]) throws -> RunResult {
            try run(program, arguments)
        }
    }

    @Test func anAllowedExecutableReadsAndOthersGetEACCES() throws {
        let s = try Scene()
        try s.allow(["app", "--exe", s.reader])

        let allowed = try s.attempt(s.reader, [s.m.path("app/token")])
        #expect(allowed.status == 0)
        #expect(String(decoding: allowed.stdout, as: UTF8.self) == "s3cret")

        // head, python3 and a byte-identical copy of the allowed binary: refused at open.
        let head = try s.attempt("/usr/bin/head", ["-c", "6", s.m.path("app/token")])
        #expect(head.status != 0 && head.stderr.contains("Permission denied"), "\(head.stderr)")
        let python = try s.attempt("/usr/bin/python3", ["-c", "import sys; open(sys.argv[1]).read()", s.m.path("app/token")])
        #expect(python.status != 0 && python.stderr.contains("PermissionError"), "\(python.stderr)")
        let copy = try s.attempt(s.copy, [s.m.path("app/token")])
        #expect(copy.status != 0 && copy.stderr.contains("Permission denied"), "\(copy.stderr)")
        #expect(copy.stdout.isEmpty)

        // Every guarded request under the ruled path, from a process no rule admits.
        let script = """
            import errno, os, sys
            base = sys.argv[1]
            def code(f):
                try:
                    f()
                    return 0
                except OSError as e:
                    return e.errno
            print(code(lambda: os.listdir(base + "/app")))
            print(code(lambda: open(base + "/app/new", "w")))
            print(code(lambda: os.mkdir(base + "/app/d")))
            print(code(lambda: os.unlink(base + "/app/token")))
            print(code(lambda: os.rename(base + "/app/token", base + "/open/token")))
            print(code(lambda: os.rename(base + "/open/plain", base + "/app/plain")))
            print(code(lambda: os.truncate(base + "/app/token", 0)))
            print(code(lambda: os.chmod(base + "/app/token", 0o600)))
            print(code(lambda: os.setxattr(base + "/app/token", "user.service", b"x")))
            print(code(lambda: os.getxattr(base + "/app/token", "user.service")))
            print(code(lambda: os.rename(base + "/app", base + "/open/app")))
            print(code(lambda: os.rmdir(base + "/app")))
            print(code(lambda: open(base + "/open/plain").read()))
            print(code(lambda: os.stat(base + "/app/token")))
            """
        let codes = try s.attempt("/usr/bin/python3", ["-c", script, s.m.mountpoint])
        let lines = String(decoding: codes.stdout, as: UTF8.self).split(separator: "\n").map(String.init)
        #expect(lines.count == 14, "\(codes.stderr)")
        #expect(Array(lines.prefix(12)) == Array(repeating: String(EACCES), count: 12))
        // Outside the ruled path nothing changes; stat is not checked (README).
        #expect(Array(lines.dropFirst(12)) == ["0", "0"])
        // Nothing was changed by the refused requests.
        #expect(String(decoding: try s.attempt(s.reader, [s.m.path("app/token")]).stdout, as: UTF8.self) == "s3cret")
    }

    @Test func aProcessRunningAReplacedBinaryNoLongerMatches() throws {
        let s = try Scene()
        try s.allow(["app", "--exe", s.shell])
        // The allowed shell reads the item itself (`read` is a builtin: no other executable).
        let direct = try s.attempt(s.shell, ["-c", "read x < \"$1\"; printf %s \"$x\"", "sh", s.m.path("app/token")])
        #expect(String(decoding: direct.stdout, as: UTF8.self) == "s3cret")

        // Started before the file at the rule's path is replaced, it reads after.
        let waiting = try HeldShell(shell: s.shell, path: s.m.path("app/token"))
        let replacement = s.bin + "/sh.new"
        try copyExecutable("/bin/dash", to: replacement)
        #expect(rename(replacement, s.shell) == 0)
        let outcome = try waiting.readNow()
        #expect(outcome.contains("cannot open") || outcome.contains("Permission denied"), "\(outcome)")
        // A process started from the new file matches: the rule follows the path.
        let fresh = try s.attempt(s.shell, ["-c", "read x < \"$1\"; printf %s \"$x\"", "sh", s.m.path("app/token")])
        #expect(String(decoding: fresh.stdout, as: UTF8.self) == "s3cret")
    }

    /// A program someone else may write (here nobody, allowed with --force) rewritten in place by
    /// that user, the inode kept: the rule's recorded size and times no longer hold, so it stops
    /// admitting, and `rules --json` says so.
    @Test func aBinaryRewrittenInPlaceStopsMatchingAndIsMarked() throws {
        let s = try Scene()
        let nobody = getpwnam("nobody").pointee
        let directory = NSTemporaryDirectory() + "kcfs-rewrite-" + UUID().uuidString
        #expect(mkdir(directory, 0o755) == 0)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let reader = directory + "/reader"
        try copyExecutable("/bin/cat", to: reader)
        #expect(chown(reader, nobody.pw_uid, nobody.pw_gid) == 0 && chmod(reader, 0o755) == 0)
        #expect(try s.m.cli.cli(["allow", "app", "--exe", reader]).exitStatus == .invalidInput, "nobody may write it")
        try s.allow(["app", "--exe", reader, "--force"])
        #expect(String(decoding: try s.attempt(reader, [s.m.path("app/token")]).stdout, as: UTF8.self) == "s3cret")

        var before = stat(), after = stat()
        #expect(stat(reader, &before) == 0)
        let rewrite = try run("/usr/bin/setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "/bin/sh", "-c",
                                                   "cat /usr/bin/head > \"$1\"", "sh", reader])
        #expect(rewrite.status == 0, "\(rewrite.stderr)")
        #expect(stat(reader, &after) == 0 && after.st_ino == before.st_ino && after.st_dev == before.st_dev, "the same inode")
        let read = try s.attempt(reader, ["-c", "6", s.m.path("app/token")])
        #expect(read.status != 0 && read.stdout.isEmpty && read.stderr.contains("Permission denied"), "\(read.stderr)")
        let listed = try s.m.cli.cli(["rules", "--json"])
        let rules = try JSONSerialization.jsonObject(with: listed.stdout) as? [[String: Any]]
        let rule = (rules?.first?["rules"] as? [[String: Any]])?.first
        #expect(rule?["fileChanged"] as? Bool == true && rule?["fileRecorded"] as? Bool == true, "\(listed.stdoutText)")
        #expect(try s.m.cli.cli(["rules"]).stdoutText.contains(Rules.replacedNote))
    }

    @Test func aUnitRuleAdmitsProcessesOfThatCgroupOnly() throws {
        let s = try Scene()
        let unit = "kcfs-test-\(getpid()).service"
        let group = try CgroupGroup(named: unit)
        try s.allow(["app", "--unit", unit, "--read-only"])

        let inUnit = try s.attempt("/bin/sh", ["-c", "echo $$ > \"$1\" && exec cat \"$2\"", "sh", group.procs, s.m.path("app/token")])
        #expect(String(decoding: inUnit.stdout, as: UTF8.self) == "s3cret", "\(inUnit.stderr)")
        // Read-only: the same unit may not write.
        let writes = try s.attempt("/bin/sh", ["-c", "echo $$ > \"$1\" && exec sh -c 'echo x > \"$0\"' \"$2\"", "sh", group.procs,
                                               s.m.path("app/token")])
        #expect(writes.status != 0 && writes.stderr.contains("Permission denied"), "\(writes.stderr)")
        let outside = try s.attempt("/bin/cat", [s.m.path("app/token")])
        #expect(outside.status != 0 && outside.stderr.contains("Permission denied"))
    }

    @Test func aChangeReachesTheRunningMountWithinASecond() throws {
        let s = try Scene()
        #expect(try s.attempt("/bin/cat", [s.m.path("app/token")]).status == 0)
        try s.allow(["app", "--exe", s.reader])
        let ruled = ContinuousClock.now
        let refused = eventually(within: 1) { (try? s.attempt("/bin/cat", [s.m.path("app/token")]).status) != 0 }
        #expect(refused, "still readable \(ContinuousClock.now - ruled) after the rule was committed")

        let lifted = try s.m.cli.cli(["disallow", "app", "--all"])
        #expect(lifted.exitStatus == .success, "\(lifted.stderr)")
        #expect(eventually(within: 1) { (try? s.attempt("/bin/cat", [s.m.path("app/token")]).status) == 0 })
    }

    @Test func aWrongPassphraseChangesNoRule() throws {
        let s = try Scene()
        let wrong = try s.m.cli.write("wrong passphrase\n", to: "wrong")
        let refused = try s.m.cli.cli(["allow", "app", "--exe", s.reader], passphraseFile: wrong)
        #expect(refused.exitStatus == .wrongPassphrase)
        // Give a change the time it would need to show: none was made.
        let rules = try s.m.cli.cli(["rules", "--json"])
        #expect(rules.exitStatus == .success)
        #expect(!String(decoding: rules.stdout, as: UTF8.self).contains("reader"))
        #expect(try s.attempt("/bin/cat", [s.m.path("app/token")]).status == 0)
    }

    @Test func aTamperedRuleRecordRefusesTheMount() throws {
        let s = try Scene()
        try s.allow(["app", "--exe", s.reader])
        try s.m.unmount()
        // Flip a bit in the sealed rule record.
        let tamper = try run("/usr/bin/sqlite3", [s.m.vault, "UPDATE rules SET sealed = CAST(zeroblob(length(sealed)) AS BLOB)"])
        #expect(tamper.status == 0, "\(tamper.stderr)")
        let mounted = try s.m.mount()
        #expect(mounted.exitStatus == .integrityFailure, "\(mounted.stderr)")
        #expect(!isMounted(s.m.mountpoint))
    }

    @Test func aRuleRecordDeletedUnderARunningMountRefusesEveryRequest() throws {
        let s = try Scene()
        try s.allow(["app", "--exe", s.reader])
        #expect(eventually(within: 1) { (try? s.attempt("/bin/cat", [s.m.path("app/token")]).status) != 0 })
        let tamper = try run("/usr/bin/sqlite3", [s.m.vault, "DELETE FROM rules"])
        #expect(tamper.status == 0, "\(tamper.stderr)")
        // Never open: the deleted rule does not let cat in; every guarded request fails.
        #expect(eventually(within: 2) {
            let outcome = try? s.attempt("/bin/cat", [s.m.path("open/plain")])
            return outcome?.status != 0 && outcome?.stderr.contains("Input/output error") == true
        })
        #expect(try s.attempt("/bin/cat", [s.m.path("app/token")]).status != 0)
    }

    @Test func confirmationAllowsDeniesAndTimesOut() throws {
        let dialog = try ScriptedConfirmation()
        let answers = dialog.directory, script = dialog.command
        let s = try Scene(mountArguments: ["--confirm-with", script, "--confirm-remember", "1s", "--confirm-timeout", "1"])
        try s.allow(["app", "--exe", s.reader, "--confirm"])

        try "allow".write(toFile: answers + "/answer", atomically: true, encoding: .utf8)
        let allowed = try s.attempt(s.reader, [s.m.path("app/token")])
        #expect(String(decoding: allowed.stdout, as: UTF8.self) == "s3cret", "\(allowed.stderr)")
        let asked = (try? String(contentsOfFile: answers + "/asked", encoding: .utf8)) ?? ""
        #expect(asked.contains("read \(s.m.mountpoint)/app/token"), "\(asked)")

        try "deny".write(toFile: answers + "/answer", atomically: true, encoding: .utf8)
        let denied = try s.attempt(s.reader, [s.m.path("app/token")])
        #expect(denied.status != 0 && denied.stderr.contains("Permission denied"))
        // A no holds for the executable (another process of it included) for the remember
        // duration: refused without asking, then asked again.
        func askedCount() -> Int { ((try? String(contentsOfFile: answers + "/asked", encoding: .utf8)) ?? "").split(separator: "\n").count }
        try "allow".write(toFile: answers + "/answer", atomically: true, encoding: .utf8)
        let stillDenied = try s.attempt(s.reader, [s.m.path("app/token")])
        #expect(stillDenied.status != 0 && askedCount() == 2, "\(askedCount())")
        #expect(eventually(within: 3) { (try? s.attempt(s.reader, [s.m.path("app/token")]))?.status == 0 })
        #expect(askedCount() == 3)

        // A hanging command: the request waits (on no thread of its own) while others are served,
        // then is refused when the command is stopped.
        try "hang".write(toFile: answers + "/answer", atomically: true, encoding: .utf8)
        let started = ContinuousClock.now
        let hanging = try Process.run(URL(fileURLWithPath: s.reader), arguments: [s.m.path("app/token")])
        #expect(eventually(within: 5) {
            askedCount() >= 4
        })
        #expect(readFile(s.m.path("open/plain")) == Array("public".utf8))
        hanging.waitUntilExit()
        #expect(hanging.terminationStatus != 0)
        #expect(ContinuousClock.now - started >= .seconds(1))

        // A confirm rule without --confirm-with: refused.
        try s.m.unmount()
        #expect(try s.m.mount().exitStatus == .success)
        let unasked = try s.attempt(s.reader, [s.m.path("app/token")])
        #expect(unasked.status != 0 && unasked.stderr.contains("Permission denied"))
    }
}

extension AccessRuleMountTests {
    /// One decoded entry of `keychainfs log --json`.
    struct LoggedEntry: Decodable {
        let pid: Int32
        let executable: String?
        let access: String
        let decision: String
        let reason: String?
        let path: String?
    }

    /// After-first-unlock items are served while locked; a rule changed meanwhile (its key is
    /// gone, so it cannot be read) refuses them until an unlock reads it.
    @Test func aRuleChangedWhileLockedRefusesUntilUnlock() throws {
        let s = try Scene()
        #expect(try s.m.cli.cli(["class", "app/token", "after-first-unlock"]).exitStatus == .success)
        #expect(try run(keychainfsBinary, ["lock", s.m.mountpoint]).exitStatus == .success)
        #expect(try s.attempt("/bin/cat", [s.m.path("app/token")]).status == 0)
        let ruled = try s.m.cli.cli(["allow", "app", "--exe", s.reader])
        #expect(ruled.exitStatus == .success, "\(ruled.stderr)")
        #expect(eventually(within: 1) { (try? run("/bin/cat", [s.m.path("app/token")]).status) != 0 })
        #expect(try s.attempt(s.reader, [s.m.path("app/token")]).status != 0)
        #expect(try run(keychainfsBinary, ["unlock", "--passphrase-file", s.m.cli.passphraseFile, s.m.mountpoint]).exitStatus == .success)
        #expect(String(decoding: try s.attempt(s.reader, [s.m.path("app/token")]).stdout, as: UTF8.self) == "s3cret")
        #expect(try s.attempt("/bin/cat", [s.m.path("app/token")]).status != 0)
    }

    /// A daemon told to end (SIGTERM) while a request waits for its confirmation ends: it exits
    /// without destroying the session under the waiting thread, and the waiting process gets an
    /// error. (A plain unmount is refused as busy meanwhile: the open is still in progress.)
    @Test func aDaemonEndedWhileAConfirmationWaitsExits() throws {
        // The dialog writes its pid (its own process group's) where the test finds it, and is
        // killed by it when the test ends: the daemon leaves it running as it goes.
        let dialog = NSTemporaryDirectory() + "keychainfs-dialog-" + UUID().uuidString
        let s = try Scene(mountArguments: ["--confirm-with", "echo $$ > \(dialog); exec sleep 60", "--confirm-timeout", "30"])
        func dialogPID() -> pid_t? { pid_t(procText(dialog).trimmingCharacters(in: .whitespacesAndNewlines)) }
        defer {
            if let pid = dialogPID() { kill(-pid, SIGKILL) }
            try? FileManager.default.removeItem(atPath: dialog)
        }
        try s.allow(["app", "--exe", s.reader, "--confirm"])
        let waiting = try Process.run(URL(fileURLWithPath: s.reader), arguments: [s.m.path("app/token")])
        #expect(eventually(within: 5) { dialogPID().map { kill($0, 0) == 0 } ?? false })
        let started = ContinuousClock.now
        let daemon = try status(s.m.mountpoint).pid
        #expect(daemon > 0 && kill(daemon, SIGTERM) == 0)
        #expect(eventually(within: 10) { kill(daemon, 0) != 0 || procText("/proc/\(daemon)/stat").contains(") Z ") })
        s.m.unmountQuietly()
        waiting.waitUntilExit()
        #expect(waiting.terminationStatus != 0)
        #expect(ContinuousClock.now - started < .seconds(20))
    }

    /// Every case the access log records, through a real mount and `keychainfs log --json`.
    @Test func theLogShowsEachCase() throws {
        let s = try Scene(mountArguments: ["--confirm-with", "exit 1"])
        try s.allow(["app", "--exe", s.reader])
        try s.allow(["open", "--exe", s.copy, "--confirm"])
        #expect(eventually(within: 1) { (try? run("/bin/cat", [s.m.path("open/plain")]).status) != 0 })
        let read = try s.attempt(s.reader, [s.m.path("app/token")])
        #expect(read.status == 0)
        let listed = try s.attempt("/bin/ls", [s.m.path("app")])
        #expect(listed.status != 0)
        let refused = try s.attempt(s.copy, [s.m.path("open/plain")])
        #expect(refused.status != 0)
        #expect(try run(keychainfsBinary, ["lock", s.m.mountpoint]).exitStatus == .success)
        #expect(try run(keychainfsBinary, ["unlock", "--passphrase-file", s.m.cli.passphraseFile, s.m.mountpoint]).exitStatus == .success)
        #expect(try s.m.cli.cli(["class", "open/plain", "after-first-unlock"]).exitStatus == .success)

        func entries() throws -> [LoggedEntry] {
            let shown = try s.m.cli.cli(["log", "--json"])
            guard shown.exitStatus == .success else { throw FixtureError("log: \(shown.stderr)") }
            return try JSONDecoder().decode([LoggedEntry].self, from: shown.stdout)
        }
        func has(_ access: String, _ decision: String, _ path: String?, executable: String? = nil) throws -> Bool {
            try entries().contains { entry in
                entry.access == access && entry.decision == decision && entry.path == path
                    && (executable == nil || entry.executable == executable)
            }
        }
        // Durable within about a second (the writer commits at most once a second).
        #expect(try eventually(within: 5) { try has("unlock", "allowed", nil) })
        #expect(try has("rule-change", "allowed", "app"))
        #expect(try has("read", "allowed", "app/token", executable: s.reader))
        #expect(try has("list", "denied", "app", executable: "/usr/bin/ls"))
        #expect(try has("confirmation", "refused", "open/plain", executable: s.copy))
        #expect(try has("lock", "allowed", nil))
        #expect(try has("class-change", "allowed", "open/plain"))
        // --denied keeps only refusals; a PATH keeps what is at or below it.
        let denied = try JSONDecoder().decode([LoggedEntry].self, from: try s.m.cli.cli(["log", "--json", "--denied"]).stdout)
        #expect(!denied.isEmpty && denied.allSatisfy { $0.decision == "denied" || $0.decision == "refused" })
        let under = try JSONDecoder().decode([LoggedEntry].self, from: try s.m.cli.cli(["log", "--json", "app"]).stdout)
        #expect(!under.isEmpty && under.allSatisfy { $0.path == "app" || $0.path?.hasPrefix("app/") == true })
        // Nothing of the paths in clear in the vault file.
        let file = try Data(contentsOf: URL(fileURLWithPath: s.m.vault))
        #expect(file.range(of: Data("app/token".utf8)) == nil)
    }
}

/// A dash process started from `shell` that reads `path` with its builtin `read` once told to,
/// so it can be started before its executable is replaced.
final class HeldShell {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()

    init(shell: String, path: String) throws {
        process.executableURL = URL(fileURLWithPath: shell)
        process.arguments = ["-c", "echo started; read go; read x < \"$1\" 2>&1 && printf %s \"$x\"; echo done", "sh", path]
        process.standardInput = input
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let line = output.fileHandleForReading.availableData
        guard String(decoding: line, as: UTF8.self).hasPrefix("started") else { throw FixtureError("the shell did not start") }
    }

    /// Tells it to read; what it printed (its error when refused).
    func readNow() throws -> String {
        input.fileHandleForWriting.write(Data("go\n".utf8))
        process.waitUntilExit()
        return String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }
}

/// A cgroup v2 group named like a systemd unit, removed when done: what `--unit` rules read.
final class CgroupGroup {
    let directory: String
    var procs: String { directory + "/cgroup.procs" }

    init(named name: String) throws {
        let mounts = procText("/proc/self/mounts").split(separator: "\n").map { $0.split(separator: " ") }
        guard let root = mounts.first(where: { $0.count > 2 && $0[2] == "cgroup2" }).map({ String($0[1]) }) else {
            throw FixtureError("no cgroup v2 hierarchy is mounted")
        }
        directory = root + "/" + name
        guard mkdir(directory, 0o755) == 0 || errno == EEXIST else { throw FixtureError("mkdir \(directory): \(errno)") }
    }

    deinit { rmdir(directory) }
}
