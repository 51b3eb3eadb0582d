@testable import Admission
@testable import Daemon
import Foundation
import Glibc
import Synchronization
import Testing
import VaultCore

/// The confirmation broker with real commands run through sh; the files they write say what
/// they saw and how often they ran.
@Suite struct ConfirmationBrokerTests {
    let directory = FileManager.default.temporaryDirectory.path + "/kcfs-confirm-" + UUID().uuidString
    let me = ProcessIdentity(pid: getpid())
    let rule = AccessRule(.unit("kcfs-test.service"), confirm: true)
    let otherRule = AccessRule(.unit("kcfs-other.service"), confirm: true)
    let token = try! VaultPath("app/token")

    init() throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { directory + "/" + name }
    func lines(_ name: String) -> [String] { procText(file(name)).split(separator: "\n").map(String.init) }
    func broker(_ command: String?, timeout: Duration = .seconds(30), remember: Duration = .seconds(300)) -> ConfirmationBroker {
        ConfirmationBroker(command: command, pathPrefix: "/mnt/vault", timeout: timeout, rememberDuration: remember)
    }

    /// Runs `body` on a thread of its own.
    func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) -> ThreadResult<T> {
        let result = ThreadResult<T>()
        Thread { result.set(body()) }.start()
        return result
    }

    @Test func exitZeroAllowsAndAnythingElseRefuses() {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let yes = broker("exit 0"), no = broker("exit 3")
        #expect(yes.ask(path: token, identity: me, access: .read, rule: rule))
        #expect(yes.settle(.confirm(rule), path: token, identity: me, access: .read) == .allow)
        #expect(!no.ask(path: token, identity: me, access: .read, rule: rule))
        #expect(no.settle(.confirm(rule), path: token, identity: me, access: .read) == .deny(.confirmationRefused(status: 3)))
        // Decisions that need no confirmation pass through untouched, and run nothing.
        #expect(no.settle(.allow, path: token, identity: me, access: .read) == .allow)
        let killed = broker("kill -TERM $$")
        #expect(killed.answer(path: token, identity: me, access: .read, rule: rule) == .refused(status: 128 + SIGTERM))
    }

    @Test func withoutACommandConfirmationIsRefusedSayingWhy() {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        guard case .deny(let denial) = broker(nil).settle(.confirm(rule), path: token, identity: me, access: .read) else {
            Issue.record("a confirmation without a command must be refused")
            return
        }
        #expect(denial.description.contains("--confirm-with"), "\(denial)")
        #expect(!denial.description.contains("token"))
    }

    @Test func aCommandThatDoesNotAnswerIsKilledWithItsChildrenAndRefuses() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let hanging = broker("sleep 60 & echo $! > \(file("child")); echo $$ > \(file("shell")); wait",
                             timeout: .milliseconds(500))
        let start = ContinuousClock.now
        let answer = hanging.answer(path: token, identity: me, access: .read, rule: rule)
        let elapsed = ContinuousClock.now - start
        #expect(answer == .timedOut(after: .milliseconds(500)))
        #expect(elapsed >= .milliseconds(500) && elapsed < .seconds(10), "\(elapsed)")
        let shell = try #require(pid_t(lines("shell").first ?? ""), "the command never started")
        let child = try #require(pid_t(lines("child").first ?? ""))
        #expect(!ProcessTable.isRunning(shell), "the shell was reaped")
        #expect(eventually { !ProcessTable.isRunning(child) }, "the dialog the shell started was killed with it")
        guard case .deny(let denial) = answer.decision, case .confirmationTimedOut(let seconds) = denial else {
            Issue.record("a timeout is a denial")
            return
        }
        #expect(seconds == 0.5)
    }

    @Test func theCommandIsToldTheRequestAndGetsNothingElseOfTheDaemon() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // A descriptor the daemon holds without close-on-exec (libraries do not always set it).
        // High, so that no descriptor the shell opens for its own redirections takes the number.
        let devNull = open("/dev/null", O_RDONLY | O_CLOEXEC)
        let leaked = fcntl(devNull, F_DUPFD, 300)
        close(devNull)
        try #require(leaked >= 300)
        defer { close(leaked) }
        // The masks are read by the command's own process after exec (which keeps both), not by a
        // child of the shell, which once saw a mask the broker did not set: a shell may block
        // signals for a moment around a fork.
        let command = """
            env | grep '^KEYCHAINFS_' | sort > \(file("env"))
            if [ -e /proc/$$/fd/\(leaked) ]; then echo leaked; else echo closed; fi > \(file("fd"))
            exec grep -E '^Sig(Blk|Ign)' /proc/self/status > \(file("signals"))
            """
        // A signal the daemon ignores (harmless to the tests beside this one: its default is to ignore it).
        let previous = signal(SIGWINCH, SIG_IGN)
        defer { signal(SIGWINCH, previous) }
        let confirming = broker(command)
        // From a thread that blocks signals, as the daemon's helper threads do.
        let result = onThread { [me, rule] in
            var blocked = sigset_t()
            sigemptyset(&blocked)
            for signal in [SIGINT, SIGTERM, SIGHUP, SIGUSR1] { sigaddset(&blocked, signal) }
            pthread_sigmask(SIG_BLOCK, &blocked, nil)
            return confirming.ask(path: try! VaultPath("app/the token"), identity: me, access: .write, rule: rule)
        }
        #expect(eventually { result.value != nil })
        #expect(result.value == true)
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        #expect(lines("env") == [
            "KEYCHAINFS_ACCESS=write",
            "KEYCHAINFS_EXE=\(exe)",
            "KEYCHAINFS_PATH=/mnt/vault/app/the token",
            "KEYCHAINFS_PID=\(getpid())",
            "KEYCHAINFS_UNIT=\(me.unit ?? "")",
        ])
        #expect(lines("fd") == ["closed"])
        // Of the standard signals (1-31) none is blocked or ignored; glibc's posix_spawn leaves its
        // two internal ones (32, 33) ignored, which no program but glibc itself uses.
        let masks = lines("signals").compactMap { UInt64($0.split(separator: "\t").last ?? "", radix: 16) }
        #expect(masks.count == 2 && masks.allSatisfy { $0 & 0x7FFF_FFFF == 0 }, "\(lines("signals"))")
    }

    @Test func anAnswerHoldsForItsProcessRuleAndAccessUntilItExpires() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let counting = broker("echo run >> \(file("runs"))", remember: .seconds(300))
        #expect(counting.ask(path: token, identity: me, access: .read, rule: rule))
        #expect(counting.ask(path: try VaultPath("app/other"), identity: me, access: .list, rule: rule))
        #expect(lines("runs").count == 1, "the same process and rule, reading: remembered")

        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/usr/bin/sleep")
        child.arguments = ["60"]
        try child.run()
        // SIGKILL: a child of a test thread inherits its blocked signals, SIGTERM among them.
        defer { kill(child.processIdentifier, SIGKILL); child.waitUntilExit() }
        #expect(counting.ask(path: token, identity: ProcessIdentity(pid: child.processIdentifier), access: .read, rule: rule))
        #expect(lines("runs").count == 2, "another process is asked about")
        #expect(counting.ask(path: token, identity: me, access: .write, rule: rule))
        #expect(lines("runs").count == 3, "a yes to reading is no yes to writing")
        #expect(counting.ask(path: token, identity: me, access: .read, rule: otherRule))
        #expect(lines("runs").count == 4, "another rule is asked about")
        counting.forgetAll()
        #expect(counting.ask(path: token, identity: me, access: .read, rule: rule))
        #expect(lines("runs").count == 5)

        let refusing = broker("echo run >> \(file("refusals")); exit 1", remember: .milliseconds(200))
        #expect(!refusing.ask(path: token, identity: me, access: .read, rule: rule))
        #expect(!refusing.ask(path: token, identity: me, access: .read, rule: rule))
        #expect(lines("refusals").count == 1, "a no is remembered too")
        #expect(eventually {
            _ = refusing.ask(path: token, identity: me, access: .read, rule: rule)
            return lines("refusals").count == 2
        }, "asked again once the answer expired")
    }

    @Test func aProcessThatIsGoneIsNotAsked() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/usr/bin/true")
        try child.run()
        child.waitUntilExit()
        let answer = broker("echo run >> \(file("runs"))").answer(path: token, identity: ProcessIdentity(pid: child.processIdentifier),
                                                                   access: .read, rule: rule)
        guard case .unavailable = answer else {
            Issue.record("\(answer)")
            return
        }
        #expect(lines("runs").isEmpty)
    }

    @Test func concurrentRequestsOfOneProcessForOneRuleWaitForOneAnswer() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let slow = broker("echo run >> \(file("runs")); while [ ! -e \(file("go")) ]; do sleep 0.02; done")
        let results = (0..<4).map { _ in onThread { [me, rule, token] in slow.ask(path: token, identity: me, access: .read, rule: rule) } }
        #expect(eventually { slow.waitingRequests == 3 && lines("runs").count == 1 }, "\(slow.waitingRequests) waiting")
        #expect(results.allSatisfy { $0.value == nil }, "nobody answered before the command did")
        #expect(FileManager.default.createFile(atPath: file("go"), contents: nil))
        #expect(eventually { results.allSatisfy { $0.value != nil } })
        #expect(results.allSatisfy { $0.value == true })
        #expect(lines("runs").count == 1)
        #expect(slow.waitingRequests == 0)
    }

    /// 4 dialogs at once, 32 more queued, the next refused at once; a queued dialog that
    /// waited longer than the timeout is refused without being shown.
    @Test func dialogsAreBoundedAndQueuedWithinTheTimeout() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let answers = Mutex<[Int: ConfirmationAnswer]>([:])
        let rules = (0..<37).map { AccessRule(.unit("kcfs-\($0).service"), confirm: true) }
        let held = broker("echo run >> \(file("runs")); while [ ! -e \(file("go")) ]; do sleep 0.02; done")
        for (index, rule) in rules.enumerated() {
            held.answer(path: token, identity: me, access: .read, rule: rule) { answer in answers.withLock { $0[index] = answer } }
        }
        #expect(eventually { lines("runs").count == 4 })
        let refusedAtOnce = answers.withLock { $0 }
        #expect(refusedAtOnce.count == 1, "\(refusedAtOnce)")
        guard case .unavailable(let reason)? = refusedAtOnce[36] else {
            Issue.record("the 37th: \(refusedAtOnce)")
            return
        }
        #expect(reason.contains("32 wait"), "\(reason)")
        #expect(FileManager.default.createFile(atPath: file("go"), contents: nil))
        #expect(eventually { answers.withLock { $0.count } == 37 })
        #expect(answers.withLock { $0 }.filter { $0.value == .allowed }.count == 36)
        #expect(lines("runs").count == 36)

        let hanging = broker("echo run >> \(file("hangs")); exec sleep 60", timeout: .milliseconds(400))
        let late = Mutex<[ConfirmationAnswer]>([])
        for rule in rules.prefix(6) {
            hanging.answer(path: token, identity: me, access: .read, rule: rule) { answer in late.withLock { $0.append(answer) } }
        }
        #expect(eventually { late.withLock { $0.count } == 6 })
        // A queued one waits from when it asked; a dialog frees a kill's time after its own
        // timeout. Asked more than that after the first of the four (a loaded machine), it has
        // waited less than the timeout when a dialog frees, and is rightly shown. What holds
        // either way: every dialog shown timed out and every other was refused unshown.
        let outcomes = late.withLock { $0 }
        let timedOut = outcomes.filter { if case .timedOut = $0 { true } else { false } }.count
        let refused = outcomes.filter { if case .unavailable(let why) = $0 { why.contains("no dialog was free") } else { false } }.count
        #expect(timedOut >= 4 && timedOut + refused == 6, "\(outcomes)")
        #expect(lines("hangs").count == timedOut, "a dialog that waited past its time is never shown")
    }

    @Test func otherRequestsAreAnsweredWhileACommandRuns() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let command = """
            case "$KEYCHAINFS_PATH" in
            */hang) echo started > \(file("started")); while [ ! -e \(file("go")) ]; do sleep 0.02; done;;
            esac
            """
        let confirming = broker(command)
        let hanging = onThread { [me, rule] in confirming.ask(path: try! VaultPath("app/hang"), identity: me, access: .read, rule: rule) }
        #expect(eventually { !lines("started").isEmpty })
        #expect(confirming.ask(path: try VaultPath("app/quick"), identity: me, access: .read, rule: otherRule))
        #expect(hanging.value == nil, "answered while the other command still runs")
        #expect(FileManager.default.createFile(atPath: file("go"), contents: nil))
        #expect(eventually { hanging.value == true })
    }
}

/// What a thread returned, once it has.
final class ThreadResult<T: Sendable>: Sendable {
    private let result = Mutex<T?>(nil)
    func set(_ value: T) { result.withLock { $0 = value } }
    var value: T? { result.withLock { $0 } }
}
