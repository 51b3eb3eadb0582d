import Foundation
import Glibc
@testable import KeychainFS
import Testing
import VaultCore

/// `keychainfs exec`: secrets as variables and files for one command, nothing left after it.
@Suite struct ExecTests {
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
        try run(keychainfsBinary, ["exec", "--vault", vault, "--passphrase-file", passphraseFile] + arguments, environment: environment)
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
