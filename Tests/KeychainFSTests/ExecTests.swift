import Foundation
import Glibc
@testable import KeychainFS
import Testing
import VaultCore

/// `keychainfs exec`: secrets as variables and files for one command, nothing left after it.
@Suite(.tags(.mount, .slow)) struct ExecTests {
    /// Prints the variables and the files' contents, then what it was told to exit with.
    static let report = """
        printf 'db=%s token=%s one=%s dir=%s\\n' "$DB_PASSWORD" "$API_TOKEN_2" "$ONE" "$KEYCHAINFS_SECRETS_DIR"
        printf 'cert=%s key=%s\\n' "$(cat "$KEYCHAINFS_SECRETS_DIR/cert.pem")" "$(cat "$KEYCHAINFS_SECRETS_DIR/key")"
        stat -c '%a %n' "$KEYCHAINFS_SECRETS_DIR" "$KEYCHAINFS_SECRETS_DIR"/*
        echo extra > "$KEYCHAINFS_SECRETS_DIR/made-by-the-command"
        exit 7
        """

    private func store(_ f: CLIFixture) throws {
        for (path, value) in [("app/db-password", "pw-1"), ("app/api.token-2", "tok-2"), ("one", "first"),
                              ("tls/cert.pem", "CERT"), ("tls/key", "KEY")] {
            let stored = try f.cli(["set", path], stdin: Data(value.utf8))
            try #require(stored.exitStatus == .success, "\(stored.stderr)")
        }
    }

    private func exec(_ arguments: [String], vault: String, passphraseFile: String, environment: [String: String] = [:]) throws -> RunResult {
        try run(keychainfsBinary, ["exec", "--no-masking", "--vault", vault, "--passphrase-file", passphraseFile] + arguments, environment: environment)
    }

    private static let everything = ["--env-dict", "app", "--env", "ONE=one", "--files", "tls", "--", "/bin/sh", "-c", report]

    /// The report's secrets and its directory, which must be gone.
    private func expectReported(_ result: RunResult) -> String? {
        #expect(result.status == 7, "\(result.stderr)")
        let lines = result.stdoutText.split(separator: "\n").map(String.init)
        guard lines.count == 5, let dir = lines[0].components(separatedBy: " dir=").last, !dir.isEmpty else {
            Issue.record("unexpected output: \(result.stdoutText) \(result.stderr)")
            return nil
        }
        #expect(lines[0] == "db=pw-1 token=tok-2 one=first dir=\(dir)")
        #expect(lines[1] == "cert=CERT key=KEY")
        #expect(lines[2] == "700 \(dir)")
        #expect(Set(lines[3...]) == ["600 \(dir)/cert.pem", "600 \(dir)/key"])
        #expect(access(dir, F_OK) != 0, "\(dir) was left behind")
        return dir
    }

    @Test func withThePassphraseAndNoMountVariablesAndFilesReachTheCommandAndNothingIsLeft() throws {
        let f = try CLIFixture()
        try store(f)
        let runtime = f.directory + "/runtime"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        let result = try exec(Self.everything, vault: f.vault, passphraseFile: f.passphraseFile,
                              environment: ["XDG_RUNTIME_DIR": runtime, "DB_PASSWORD": "replaced"])
        let dir = expectReported(result)
        #expect(dir?.hasPrefix(runtime + "/keychainfs-exec-") == true)
        #expect(try FileManager.default.contentsOfDirectory(atPath: runtime) == [])
    }

    @Test func throughAnUnlockedMountNoPassphraseIsAskedAndTheReadsAreLogged() throws {
        let m = try MountFixture()
        try store(m.cli)
        let result = try exec(Self.everything, vault: m.vault, passphraseFile: m.cli.directory + "/no-such-file")
        _ = expectReported(result)
        // The daemon commits its log about every second.
        func log() -> String {
            (try? run(keychainfsBinary, ["log", "--vault", m.vault, "--passphrase-file", m.cli.passphraseFile]).stdoutText) ?? ""
        }
        let paths = ["app/db-password", "app/api.token-2", "one", "tls/cert.pem", "tls/key"]
        #expect(eventually { let text = log(); return paths.allSatisfy { text.contains("  read  allowed  \($0)") } }, "\(log())")
    }

    @Test func aLockedMountTakesThePassphrase() throws {
        let m = try MountFixture()
        try store(m.cli)
        try #require(try run(keychainfsBinary, ["lock", m.mountpoint]).exitStatus == .success)
        let without = try exec(["--env", "ONE=one", "--", "/bin/true"], vault: m.vault, passphraseFile: m.cli.directory + "/no-such-file")
        #expect(without.exitStatus != .success)
        _ = expectReported(try exec(Self.everything, vault: m.vault, passphraseFile: m.cli.passphraseFile))
    }

    @Test func anAccessRuleRefusesExecsRead() throws {
        let m = try MountFixture()
        try store(m.cli)
        try #require(try m.cli.cli(["allow", "app", "--exe", "/usr/bin/curl"]).exitStatus == .success)
        let noPassphrase = m.cli.directory + "/no-such-file"
        // A running mount applies a rule within a second.
        #expect(eventually {
            (try? exec(["--env-dict", "app", "--", "/bin/true"], vault: m.vault, passphraseFile: noPassphrase))?.exitStatus == .accessDenied
        })
        let refused = try exec(["--env", "X=app/db-password", "--", "/bin/echo", "ran"], vault: m.vault, passphraseFile: noPassphrase)
        #expect(refused.exitStatus == .accessDenied && refused.stdoutText.isEmpty, "\(refused.stderr)")
        #expect(refused.stderr.contains("no access rule admits process"), "\(refused.stderr)")
        // What the rules do not govern is still given.
        let open = try exec(["--env", "X=one", "--", "/bin/sh", "-c", "echo $X"], vault: m.vault, passphraseFile: noPassphrase)
        #expect(open.stdoutText == "first\n", "\(open.stderr)")
    }

    /// A --confirm rule over exec: asked once, then served (the answer is remembered for the
    /// second decision, as through the mount), or refused when the dialog says no.
    @Test func aConfirmRuleAsksForExecsRead() throws {
        let dialog = try ScriptedConfirmation()
        let m = try MountFixture()
        try m.unmount()
        try #require(try m.mount(extra: ["--confirm-with", dialog.command, "--confirm-remember", "1s"]).exitStatus == .success)
        try store(m.cli)
        let keychainfs = try sh("readlink -f '\(keychainfsBinary)'").stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        // --force: the build's binary is wherever the repository is, perhaps a directory of a
        // user other than root (allow's refusal of that is ReplaceableExecutableTests' point).
        try #require(try m.cli.cli(["allow", "app", "--exe", keychainfs, "--confirm", "--force"]).exitStatus == .success)
        let noPassphrase = m.cli.directory + "/no-such-file"
        let read = { try self.exec(["--env", "X=app/db-password", "--", "/bin/sh", "-c", "echo $X"], vault: m.vault, passphraseFile: noPassphrase) }
        try "deny".write(toFile: dialog.directory + "/answer", atomically: true, encoding: .utf8)
        // Refused by the dialog once the rule applies (within a second).
        #expect(eventually(within: 3) { (try? read())?.exitStatus == .accessDenied })
        try "allow".write(toFile: dialog.directory + "/answer", atomically: true, encoding: .utf8)
        // The no holds for the executable for the remember duration (1 s), then it is asked again.
        #expect(eventually(within: 3) { (try? read())?.stdoutText == "pw-1\n" })
        let asked = (try? String(contentsOfFile: dialog.directory + "/asked", encoding: .utf8)) ?? ""
        #expect(asked.split(separator: "\n").count == 2, "\(asked)")
    }

    /// A mount of a user other than root (nobody) admits `exec` by a rule on the keychainfs
    /// binary: such a daemon can read /proc/PID/exe only of a dumpable process, and exec is one
    /// while it asks a mount (it holds no key then). A passphrase makes it non-dumpable again.
    @Test func aRuleOnKeychainfsAdmitsExecToAMountOfAnotherUser() throws {
        let nobody = getpwnam("nobody").pointee
        // Short: the control socket under it must fit in a sockaddr_un.
        let home = NSTemporaryDirectory() + "kx-" + UUID().uuidString.prefix(8)
        #expect(mkdir(home, 0o700) == 0 && chown(home, nobody.pw_uid, nobody.pw_gid) == 0)
        defer { try? FileManager.default.removeItem(atPath: home) }
        let vault = home + "/test.vault", passphrase = home + "/pw", mountpoint = home + "/mnt"
        let environment = ["HOME": home, "XDG_RUNTIME_DIR": home + "/run", "XDG_DATA_HOME": home + "/data",
                           "XDG_STATE_HOME": home + "/state", "XDG_CONFIG_HOME": home + "/config"]
        func asNobody(_ arguments: [String], stdin: String? = nil) throws -> RunResult {
            try run("/usr/bin/setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups"] + arguments,
                    stdin: stdin.map { Data($0.utf8) }, environment: environment)
        }
        func keychainfs(_ arguments: [String], stdin: String? = nil) throws -> RunResult {
            try asNobody([keychainfsBinary] + arguments, stdin: stdin)
        }
        let prepared = try asNobody(["/bin/sh", "-c", "cd \"$1\" && umask 077 && mkdir run mnt && echo 'correct horse battery staple' > pw",
                                     "sh", home])
        try #require(prepared.status == 0, "\(prepared.stderr)")
        let vaultOptions = ["--vault", vault, "--passphrase-file", passphrase]
        let made = try keychainfs(["init", "--kdf", "interactive"] + vaultOptions)
        try #require(made.exitStatus == .success, "\(made.stderr)")
        try #require(try keychainfs(["set"] + vaultOptions + ["app/token"], stdin: "s3cret").exitStatus == .success)
        let mounted = try keychainfs(["mount"] + vaultOptions + ["--kdf", "interactive", mountpoint])
        try #require(mounted.exitStatus == .success, "\(mounted.stderr)")
        defer {
            _ = try? keychainfs(["unmount", mountpoint])
            if isMounted(mountpoint) { _ = try? run("/bin/fusermount3", ["-u", "-z", mountpoint]) }
        }
        let binary = try sh("readlink -f '\(keychainfsBinary)'").stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        // --force: the build's binary is wherever the repository is.
        let allowed = try keychainfs(["allow"] + vaultOptions + ["app", "--exe", binary, "--force"])
        try #require(allowed.exitStatus == .success, "\(allowed.stderr)")
        #expect(eventually(within: 2) { (try? asNobody(["/bin/cat", mountpoint + "/app/token"]))?.status != 0 }, "the rule applies")

        let read = try keychainfs(["exec", "--no-masking", "--vault", vault, "--passphrase-file", home + "/no-such-file",
                                   "--env", "X=app/token", "--", "/bin/sh", "-c", "echo \"$X\""])
        #expect(read.exitStatus == .success && read.stdoutText == "s3cret\n", "\(read.stderr)")
        let denied = try asNobody(["/bin/sh", "-c", "cat \"$1\" || true", "sh", mountpoint + "/app/token"])
        #expect(!denied.stdoutText.contains("s3cret"), "a program the rule does not name is refused")

        // With the passphrase (no mount to ask), exec holds a key and is not dumpable: its
        // user's other processes (here its own command) cannot read even its executable link.
        #expect(try keychainfs(["unmount", mountpoint]).exitStatus == .success)
        let opened = try keychainfs(["exec", "--no-masking"] + vaultOptions + ["--env", "X=app/token", "--", "/bin/sh", "-c",
                                                                "echo \"$X\"; readlink /proc/$PPID/exe || echo unreadable"])
        #expect(opened.stdoutText == "s3cret\nunreadable\n", "\(opened.stdoutText) \(opened.stderr)")
    }

    /// exec was dumpable while it asked a locked mount, then turns to the passphrase: a tracer
    /// that attached meanwhile (here strace, there from the start) would see the key, so it is
    /// refused. Without the mount to ask, exec never was dumpable, and strace is the user's own.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/strace")))
    func aTracedExecTakesNoPassphraseAfterAskingAMount() throws {
        let m = try MountFixture()
        try store(m.cli)
        let traced = { (passphrase: String) throws -> RunResult in
            try run("/usr/bin/strace", ["-f", "-o", "/dev/null", keychainfsBinary, "exec", "--no-masking", "--vault", m.vault,
                                        "--passphrase-file", passphrase, "--env", "X=one", "--", "/bin/sh", "-c", "echo \"$X\""])
        }
        #expect(try run(keychainfsBinary, ["lock", m.mountpoint]).exitStatus == .success)
        let refused = try traced(m.cli.passphraseFile)
        #expect(refused.exitStatus == .failure && refused.stderr.contains("is tracing this one") && refused.stdoutText.isEmpty,
                "\(refused.stdoutText) \(refused.stderr)")
        try m.unmount()
        let unmounted = try traced(m.cli.passphraseFile)
        #expect(unmounted.exitStatus == .success && unmounted.stdoutText == "first\n", "\(unmounted.stderr)")
    }

    @Test func aSignalToExecReachesTheCommandAndTheDirectoryGoes() throws {
        let f = try CLIFixture()
        try store(f)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: keychainfsBinary)
        process.arguments = ["exec", "--vault", f.vault, "--passphrase-file", f.passphraseFile, "--files", "tls", "--", "/bin/sh", "-c",
                             "trap 'echo got TERM; exit 42' TERM; echo \"$KEYCHAINFS_SECRETS_DIR\"; while :; do sleep 0.05; done"]
        let output = Pipe()
        process.standardOutput = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let dir = PrivateSessionBus.readLine(output.fileHandleForReading.fileDescriptor, deadline: .now + .seconds(20))
        try #require(dir != nil && access(dir!, F_OK) == 0)
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 42)
        #expect(PrivateSessionBus.readLine(output.fileHandleForReading.fileDescriptor, deadline: .now + .seconds(5)) == "got TERM")
        #expect(access(dir!, F_OK) != 0, "\(dir!) was left behind")
    }

    @Test func aCommandKilledByASignalEndsExecWithIt() throws {
        let f = try CLIFixture()
        try store(f)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: keychainfsBinary)
        process.arguments = ["exec", "--vault", f.vault, "--passphrase-file", f.passphraseFile, "--files", "tls", "--",
                             "/bin/sh", "-c", "echo \"$KEYCHAINFS_SECRETS_DIR\"; kill -KILL $$"]
        let output = Pipe()
        process.standardOutput = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let dir = PrivateSessionBus.readLine(output.fileHandleForReading.fileDescriptor, deadline: .now + .seconds(20))
        process.waitUntilExit()
        #expect(process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL)
        #expect(dir.map { access($0, F_OK) != 0 } == true, "\(dir ?? "no directory") was left behind")
    }

    @Test func namesBecomeVariableNames() throws {
        let cases = ["db-password": "DB_PASSWORD", "api.token": "API_TOKEN", "2fa": "_2FA", "Mixed_Case9": "MIXED_CASE9", "é": "__"]
        for (item, variable) in cases {
            #expect(ExecSecrets.variableName(for: try ItemName(item)) == Array(variable.utf8), "\(item)")
        }
        #expect(ExecSecrets.isVariableName("GOOD_1".utf8) && !ExecSecrets.isVariableName("1BAD".utf8) && !ExecSecrets.isVariableName("A-B".utf8))
        let f = try CLIFixture()
        for (path, value) in [("d/a-b", "1"), ("d/A_B", "2")] {
            try #require(try f.cli(["set", path], stdin: Data(value.utf8)).exitStatus == .success)
        }
        let clash = try exec(["--env-dict", "d", "--", "/bin/true"], vault: f.vault, passphraseFile: f.passphraseFile)
        #expect(clash.exitStatus == .invalidInput && clash.stderr.contains("A_B: two secrets would set this variable"), "\(clash.stderr)")
        let missing = try exec(["--", "/no/such/command"], vault: f.vault, passphraseFile: f.passphraseFile)
        #expect(missing.status == 127, "\(missing.stderr)")
    }
}
