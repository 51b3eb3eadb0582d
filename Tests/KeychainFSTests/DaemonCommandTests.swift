import Daemon
import Foundation
import Glibc
import Support
import Testing

/// The everyday commands without a passphrase, through the daemon that holds the vault
/// unlocked: a mount, or a secret-service without one. The rules judge the command's own
/// process, a locked daemon says so in one line, and what proves the owner (rules, classes,
/// the passphrase) still takes the passphrase.
@Suite(.tags(.mount, .slow)) struct DaemonCommandTests {
    /// `keychainfs ARGS --vault V`, with no passphrase option and no terminal: only a daemon
    /// can answer.
    private func bare(_ vault: String, _ arguments: [String], stdin: Data? = nil,
                      environment: [String: String] = [:]) throws -> RunResult {
        var args = arguments
        args.insert(contentsOf: ["--vault", vault], at: 1)
        return try run(keychainfsBinary, args, stdin: stdin, environment: environment)
    }

    @Test func everyCommandWorksThroughAnUnlockedMount() throws {
        let m = try MountFixture()
        let v = m.vault
        func ok(_ arguments: [String], stdin: String? = nil) throws -> String {
            let result = try bare(v, arguments, stdin: stdin.map { Data($0.utf8) })
            #expect(result.exitStatus == .success, "\(arguments): \(result.stderr)")
            return result.stdoutText
        }
        _ = try ok(["set", "app/token", "--attr", "service=github"], stdin: "s3cret")
        // The mount shows the change at once: the daemon dropped what the kernel cached.
        #expect(String(decoding: readFile(m.path("app/token")) ?? [], as: UTF8.self) == "s3cret")
        #expect(try ok(["get", "app/token"]) == "s3cret")
        #expect(try ok(["get", "--json", "app/token"]).contains("\"value\":\"s3cret\""))
        #expect(try ok(["ls", "app"]) == "token\n")
        #expect(try ok(["ls", "-l", "app"]).hasSuffix("  token\n"))
        #expect(try ok(["ls", "--json"]).contains("\"name\":\"app\""))
        #expect(try ok(["find", "service=github"]) == "app/token\n")
        #expect(try ok(["find", "--json", "service=github"]).contains("\"service\":\"github\""))
        _ = try ok(["attr", "app/token", "user=me"])
        #expect(try ok(["attr", "app/token"]) == "service=github\nuser=me\n")
        #expect(try ok(["attr", "app/token", "user"]) == "me")
        _ = try ok(["attr", "app/token", "--remove", "user"])
        _ = try ok(["label", "app/token", "GitHub token"])
        #expect(try ok(["label", "app/token"]) == "GitHub token")
        #expect(try ok(["class", "app/token"]) == "when-unlocked\n")
        _ = try ok(["mkdir", "-p", "x/y"])
        _ = try ok(["mv", "app/token", "x/y"])
        #expect(String(decoding: readFile(m.path("x/y/token")) ?? [], as: UTF8.self) == "s3cret")
        #expect(try ok(["rules"]) == "")
        #expect(eventually { ((try? self.bare(v, ["log"]))?.stdoutText ?? "").contains("  read  allowed  app/token") })
        let archive = m.cli.directory + "/all.kca"
        let archivePassphrase = try m.cli.write("archive pass", to: "archive-pw")
        _ = try ok(["export", "--to", archive, "--archive-passphrase-file", archivePassphrase])
        _ = try ok(["rm", "-r", "x"])
        #expect(try ok(["ls"]) == "app/\n")
        #expect(access(m.path("x"), F_OK) != 0)
        // The archive the daemon streamed imports into a vault of its own.
        let other = try CLIFixture()
        let imported = try run(keychainfsBinary, ["import", "archive", archive, "--vault", other.vault, "--passphrase-file",
                                                  other.passphraseFile, "--archive-passphrase-file", archivePassphrase])
        #expect(imported.exitStatus == .success, "\(imported.stderr)")
        #expect(try other.cli(["get", "x/y/token"]).stdoutText == "s3cret")
        #expect(try other.cli(["label", "x/y/token"]).stdoutText == "GitHub token")
        let status = try run(keychainfsBinary, ["status", "--json", m.mountpoint])
        #expect(status.stdoutText.contains("\"locked\":false"), "\(status.stdoutText)")
    }

    @Test func aLockedDaemonSaysSoInOneLineAndThePassphraseStillOpensTheVault() throws {
        let m = try MountFixture()
        try #require(try m.cli.cli(["set", "app/token"], stdin: Data("s3cret".utf8)).exitStatus == .success)
        try #require(try run(keychainfsBinary, ["lock", "--vault", m.vault]).exitStatus == .success)
        let locked = try bare(m.vault, ["get", "app/token"])
        #expect(locked.exitStatus == .vaultBusy)
        #expect(locked.stderr == "keychainfs: " + "the vault is locked: `keychainfs unlock` unlocks it (or give --passphrase-file or --extpass to open the vault file here)\n",
                "\(locked.stderr)")
        #expect(locked.stdoutText.isEmpty)
        // A passphrase given opens the vault file itself, as without a daemon.
        #expect(try m.cli.cli(["get", "app/token"]).stdoutText == "s3cret")
        let unlocked = try run(keychainfsBinary, ["unlock", "--vault", m.vault, "--passphrase-file", m.cli.passphraseFile])
        #expect(unlocked.exitStatus == .success, "\(unlocked.stderr)")
        #expect(try bare(m.vault, ["get", "app/token"]).stdoutText == "s3cret")
        let wrong = try m.cli.write("wrong", to: "wrong-pw")
        try #require(try run(keychainfsBinary, ["lock", m.mountpoint]).exitStatus == .success)
        #expect(try run(keychainfsBinary, ["unlock", "--vault", m.vault, "--passphrase-file", wrong]).exitStatus == .wrongPassphrase)
        #expect(try bare(m.vault, ["get", "app/token"]).exitStatus == .vaultBusy)
    }

    /// A daemon that is stopped (SIGSTOP, a debugger) or stuck keeps its socket: a command that
    /// asks it says so within seconds, once its queue of connections is full too, and `status`
    /// of every mount still finishes. `timeout 60` turns a hang into a failure.
    @Test func aStoppedDaemonIsReportedNotWaitedForEver() throws {
        let m = try MountFixture()
        try #require(try m.cli.cli(["set", "app/token"], stdin: Data("s3cret".utf8)).exitStatus == .success)
        let pid = try status(m.mountpoint).pid
        try #require(pid > 0 && kill(pid, SIGSTOP) == 0)
        defer { kill(pid, SIGCONT) }
        let silent = try run("/usr/bin/timeout", ["60", keychainfsBinary, "status", m.mountpoint])
        #expect(silent.status == Int32(Support.ExitStatus.failure.rawValue), "\(silent.status) \(silent.stderr)")
        #expect(silent.stderr.contains("gave no answer within 5 s"), "\(silent.stderr)")
        let script = """
            import socket, subprocess, sys
            path, kfs, mountpoint, vault = sys.argv[1:5]
            held = []
            for _ in range(64):
                s = socket.socket(socket.AF_UNIX)
                s.setblocking(False)
                try:
                    s.connect(path)
                except BlockingIOError:
                    break
                held.append(s)
            for arguments in (['status', mountpoint], ['get', '--vault', vault, 'app/token'], ['status']):
                r = subprocess.run(['timeout', '60', kfs] + arguments, capture_output=True, text=True)
                print(r.returncode, r.stderr.strip())
            """
        let full = try run("/usr/bin/python3", ["-c", script, RuntimeState.socketPath(for: m.mountpoint), keychainfsBinary, m.mountpoint, m.vault])
        let lines = full.stdoutText.split(separator: "\n").map(String.init)
        try #require(lines.count == 3, "\(full.stdoutText) \(full.stderr)")
        let refused = "\(Support.ExitStatus.mountFailure.rawValue) keychainfs: the keychainfs daemon for this mount accepts no connection"
        #expect(lines[0].hasPrefix(refused), "\(lines[0])")
        #expect(lines[1].hasPrefix(refused), "\(lines[1])")
        #expect(lines[2].hasPrefix("0"), "every mount's status finishes: \(lines[2])")
        kill(pid, SIGCONT)
        #expect(eventually { (try? bare(m.vault, ["get", "app/token"]))?.stdoutText == "s3cret" })
    }

    @Test func rulesClassesAndThePassphraseStillNeedThePassphrase() throws {
        let m = try MountFixture()
        try #require(try m.cli.cli(["set", "app/token"], stdin: Data("s3cret".utf8)).exitStatus == .success)
        for arguments in [["class", "app/token", "after-first-unlock"], ["allow", "app", "--exe", "/usr/bin/curl"],
                          ["disallow", "app", "--all"], ["passwd", "--new-passphrase-file", m.cli.passphraseFile],
                          ["set", "--class", "after-first-unlock", "app/other", "x"]] {
            let refused = try bare(m.vault, arguments)
            #expect(refused.exitStatus != .success, "\(arguments)")
            #expect(refused.stderr.contains("not on a terminal"), "\(arguments): \(refused.stderr)")
        }
        #expect(try bare(m.vault, ["class", "app/token"]).stdoutText == "when-unlocked\n")
        #expect(try bare(m.vault, ["get", "app/other"]).exitStatus == .notFound)
    }

    /// A rule on `app` that admits only curl: the command line is a program like any other.
    @Test func aRuleRefusesTheCommandLineAsItRefusesAnyProgram() throws {
        let m = try MountFixture()
        for (path, value) in [("app/token", "s3cret"), ("free", "open")] {
            try #require(try m.cli.cli(["set", path, "--attr", "kind=test"], stdin: Data(value.utf8)).exitStatus == .success)
        }
        try #require(try m.cli.cli(["allow", "app", "--exe", "/usr/bin/curl"]).exitStatus == .success)
        // A running mount applies a rule within a second.
        #expect(eventually { (try? self.bare(m.vault, ["get", "app/token"]))?.exitStatus == .accessDenied })
        for arguments in [["get", "app/token"], ["ls", "app"], ["attr", "app/token"], ["label", "app/token"],
                          ["set", "app/new", "x"], ["set", "app/token", "replaced"], ["rm", "app/token"], ["mv", "app/token", "stolen"],
                          ["attr", "app/token", "kind=changed"], ["log"], ["export", "--to", m.cli.directory + "/x.kca",
                                                                            "--archive-passphrase-file", m.cli.passphraseFile]] {
            let refused = try bare(m.vault, arguments)
            #expect(refused.exitStatus == .accessDenied, "\(arguments): \(refused.stderr)")
            #expect(refused.stderr.contains("no access rule admits process"), "\(arguments): \(refused.stderr)")
            #expect(!refused.stdoutText.contains("s3cret"))
        }
        // Found is what it may read: a match would tell it the attribute's value.
        #expect(try bare(m.vault, ["find", "kind=test"]).stdoutText == "free\n")
        #expect(try bare(m.vault, ["get", "free"]).stdoutText == "open")
        // Nothing changed, and the log (read with the passphrase) names the refused process.
        #expect(try m.cli.cli(["get", "app/token"]).stdoutText == "s3cret")
        #expect(eventually {
            let log = (try? m.cli.cli(["log", "--denied"]))?.stdoutText ?? ""
            return log.split(separator: "\n").contains { $0.contains("keychainfs") && $0.contains("denied (") && $0.hasSuffix("  app/token") }
        })
    }

    /// Requests no keychainfs sends: each gets one clear error, and the daemon goes on.
    @Test func aHostileClientGetsClearErrorsAndTheDaemonGoesOn() throws {
        let m = try MountFixture()
        try #require(try m.cli.cli(["set", "app/token"], stdin: Data("s3cret".utf8)).exitStatus == .success)
        let script = """
            import socket, sys
            def ask(data, close_early=False):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(sys.argv[1])
                s.sendall(data)
                if close_early:
                    s.shutdown(socket.SHUT_WR)
                reply = b''
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    reply += chunk
                print(reply.decode(errors='replace').strip() or '(closed)')
            ask(b'cmd item 99999999999\\n')
            ask(b'cmd nosuchverb 3\\nabc')
            ask(b'cmd item 3\\nabc')
            ask(b'cmd item 100\\n' + b'x' * 10, close_early=True)
            ask(b'cmd store 12\\n' + b'\\xff' * 12)
            """
        let result = try run("/usr/bin/python3", ["-c", script, RuntimeState.socketPath(for: m.mountpoint)])
        let lines = result.stdoutText.split(separator: "\n").map(String.init)
        try #require(lines.count == 5, "\(result.stdoutText) \(result.stderr)")
        #expect(lines[0].hasPrefix("error 7 ") && lines[0].contains("too large"), "\(lines[0])")
        #expect(lines[1] == "error 64 malformed command request", "\(lines[1])")
        #expect(lines[2].hasPrefix("error 7 malformed control message"), "\(lines[2])")
        #expect(lines[3].hasPrefix("error 64 short request"), "\(lines[3])")
        #expect(lines[4].hasPrefix("error 7 malformed control message"), "\(lines[4])")
        #expect(try bare(m.vault, ["get", "app/token"]).stdoutText == "s3cret")
    }

    @Test func severalVaultsTheOneVaultNamesElseTheDefault() throws {
        let first = try MountFixture(), second = try MountFixture()
        try #require(try first.cli.cli(["set", "which"], stdin: Data("first".utf8)).exitStatus == .success)
        try #require(try second.cli.cli(["set", "which"], stdin: Data("second".utf8)).exitStatus == .success)
        #expect(try bare(first.vault, ["get", "which"]).stdoutText == "first")
        #expect(try bare(second.vault, ["get", "which"]).stdoutText == "second")
        let byDefault = try run(keychainfsBinary, ["get", "which"], environment: ["KEYCHAINFS_VAULT": second.vault])
        #expect(byDefault.stdoutText == "second", "\(byDefault.stderr)")
        // No daemon serves a third vault: the passphrase is asked, and there is no terminal.
        let third = try CLIFixture()
        let asked = try bare(third.vault, ["get", "which"])
        #expect(asked.stderr.contains("not on a terminal"), "\(asked.stderr)")
    }

    /// A secret-service without a mount serves the command line too, and `lock`/`unlock --vault`
    /// and `status` reach it.
    @Test(.tags(.bus)) func aSecretServiceWithoutAMountServesTheCommandLine() throws {
        let bus = try PrivateSessionBus()
        let cli = try CLIFixture()
        try #require(try cli.cli(["set", "app/token"], stdin: Data("s3cret".utf8)).exitStatus == .success)
        // Short: the control socket under it must fit in a sockaddr_un.
        let runtime = NSTemporaryDirectory() + "kr-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        var environment = bus.environment
        environment["XDG_RUNTIME_DIR"] = runtime
        let service = try startProcess(keychainfsBinary, ["secret-service", "--vault", cli.vault, "--passphrase-file", cli.passphraseFile],
                                       environment: environment)
        defer { service.terminate(); service.waitUntilExit() }
        var got = try bare(cli.vault, ["get", "app/token"], environment: environment)
        #expect(eventually(within: 20) {
            got = (try? self.bare(cli.vault, ["get", "app/token"], environment: environment)) ?? got
            return got.exitStatus == .success
        }, "\(got.stderr)")
        #expect(got.stdoutText == "s3cret")
        #expect(try bare(cli.vault, ["set", "app/second", "two"], environment: environment).exitStatus == .success)
        let status = try run(keychainfsBinary, ["status", "--json"], environment: environment)
        #expect(status.stdoutText.contains("\"mountpoint\":null"), "\(status.stdoutText)")
        #expect(status.stdoutText.contains("\"pid\":\(service.processIdentifier)"), "\(status.stdoutText)")
        #expect(try run(keychainfsBinary, ["lock", "--vault", cli.vault], environment: environment).exitStatus == .success)
        #expect(try bare(cli.vault, ["get", "app/token"], environment: environment).exitStatus == .vaultBusy)
        let unlocked = try run(keychainfsBinary, ["unlock", "--vault", cli.vault, "--passphrase-file", cli.passphraseFile],
                               environment: environment)
        #expect(unlocked.exitStatus == .success, "\(unlocked.stderr)")
        #expect(try bare(cli.vault, ["get", "app/second"], environment: environment).stdoutText == "two")
        service.terminate()
        service.waitUntilExit()
        #expect(try FileManager.default.contentsOfDirectory(atPath: runtime + "/keychainfs").isEmpty)
    }
}
