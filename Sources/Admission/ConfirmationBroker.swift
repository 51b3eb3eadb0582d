import CSodium
import Glibc
import Locking
import Support
import Synchronization
import VaultCore

/// Asks the user, through the `--confirm-with` command, whether a process may have the access
/// a `confirm` rule lets it ask for, and remembers the answer (see `RememberedConfirmations`).
///
/// It cannot be flooded. Requests of one executable for one rule and kind of access share one
/// dialog whatever their pid; at most `maximumDialogs` commands run at once, each on a thread
/// of the broker's own; further dialogs wait in a queue of at most `maximumQueued`, each for
/// at most the command's timeout, and are refused beyond either bound. A request waiting for
/// a dialog holds no thread: it is a completion called with the answer (a caller that must
/// block, a control socket connection's thread, waits in `AccessGate.admitWaiting`). A refusal holds for
/// every process of the executable for `refusalDuration`: a program refused cannot ask again
/// by starting itself again. The lock guards the tables alone and is never held while a
/// command runs or a completion is called.
package final class ConfirmationBroker: Sendable {
    static let defaultTimeout = Duration.seconds(30)
    static let defaultRememberDuration = Duration.seconds(300)
    /// Dialogs on the screen at once: enough for a few programs asking together, few enough
    /// that a flood cannot bury the screen in windows nor the daemon in threads.
    static let maximumDialogs = 4
    /// Dialogs waiting for one of those: each is one executable and rule, so this many
    /// programs asking at once is already more than a person answers in a timeout.
    static let maximumQueued = 32
    /// How long a no holds for the executable refused (less when answers are remembered for
    /// less): long enough to stop a loop of requests, short enough that a no given by mistake
    /// is soon asked again.
    static let longestRefusal = Duration.seconds(30)

    /// How much stack below the dialog loop is wiped after its completions ran: more than a
    /// request's serving uses (the largest READ is 16 KiB, and buffers are on the heap).
    static let servedStackBytes = 128 * 1024

    typealias Completion = @Sendable (ConfirmationAnswer) -> Void

    private let command: ConfirmationCommand?
    private let pathPrefix: String
    private let timeout: Duration
    private let rememberDuration: Duration
    private let refusalDuration: Duration
    private let state = OrderedMutex(.confirmationBroker, State())

    /// A dialog shown or waiting to be: what the command is told, and who waits for it.
    private struct Dialog {
        let request: ConfirmationCommand.Request
        /// Each waiter's own process, to remember a yes for (nil: its process is the asker's).
        var waiters: [(process: RememberedConfirmations.Key?, completion: Completion)]
        let queuedUntil: ContinuousClock.Instant
    }

    private struct State {
        var remembered = RememberedConfirmations()
        var dialogs: [RememberedConfirmations.Key: Dialog] = [:]
        /// Dialogs not started yet, oldest first.
        var queue: [RememberedConfirmations.Key] = []
        var running = 0
        /// Requests waiting for another's dialog to answer; tests watch it.
        var waiting = 0
    }

    /// - Parameters:
    ///   - command: the `--confirm-with` command; without one, every confirmation is refused,
    ///     saying so.
    ///   - pathPrefix: what `KEYCHAINFS_PATH` starts with (the mountpoint), the vault path after it.
    package init(command: String?, pathPrefix: String, timeout: Duration = defaultTimeout,
         rememberDuration: Duration = defaultRememberDuration) {
        self.command = command.map { ConfirmationCommand(shellCommand: $0, timeout: timeout) }
        self.pathPrefix = pathPrefix
        self.timeout = timeout
        self.rememberDuration = rememberDuration
        refusalDuration = min(rememberDuration, ConfirmationBroker.longestRefusal)
    }

    /// Whether the user allows `identity` the `access` to `path` that `rule` makes it ask for.
    /// Blocks the calling thread until there is an answer.
    func ask(path: VaultPath, identity: ProcessIdentity, access: Access, rule: AccessRule) -> Bool {
        answer(path: path, identity: identity, access: access, rule: rule).allows
    }

    /// A policy's decision with any confirmation it calls for settled: `.allow` or `.deny`.
    func settle(_ decision: AccessDecision, path: VaultPath, identity: ProcessIdentity, access: Access) -> AccessDecision {
        guard case .confirm(let rule) = decision else { return decision }
        return answer(path: path, identity: identity, access: access, rule: rule).decision
    }

    /// The answer, blocking the calling thread until there is one (at most the time a queued
    /// dialog waits, plus the timeout, plus the time to kill a command that gave none).
    func answer(path: VaultPath, identity: ProcessIdentity, access: Access, rule: AccessRule) -> ConfirmationAnswer {
        let pending = PendingAnswer<ConfirmationAnswer>()
        answer(path: path, identity: identity, access: access, rule: rule) { pending.fulfil($0) }
        return pending.wait()
    }

    /// Calls `completion` with the answer: on the calling thread when it is known at once (a
    /// remembered answer, nobody to ask, too many waiting), else on the thread of the dialog
    /// that answers.
    func answer(path: VaultPath, identity: ProcessIdentity, access: Access, rule: AccessRule,
                then completion: @escaping Completion) {
        guard let command else {
            return completion(.unavailable("the mount was started without --confirm-with, so nobody can be asked"))
        }
        guard let processID = identity.processID, let startTime = identity.startTime else {
            return completion(.unavailable("process \(identity.pid) is gone"))
        }
        let process = RememberedConfirmations.Key(processID: processID, startTime: startTime, rule: rule, access: access)
        let subject = identity.executable.map { RememberedConfirmations.Subject.executable($0.file) } ?? process.subject
        let key = RememberedConfirmations.Key(subject: subject, rule: rule, access: access)

        enum Role {
            case known(ConfirmationAnswer)
            case joined
            case start
        }
        let now = ContinuousClock.now
        let role: Role = state.withLock { state in
            if let answer = state.remembered.answer(for: process, at: now) { return .known(answer) }
            if let answer = state.remembered.answer(for: key, at: now) { return .known(answer) }
            if state.dialogs[key] != nil {
                state.dialogs[key]!.waiters.append((process, completion))
                state.waiting += 1
                return .joined
            }
            guard state.running < ConfirmationBroker.maximumDialogs || state.queue.count < ConfirmationBroker.maximumQueued else {
                return .known(.unavailable("\(ConfirmationBroker.maximumDialogs) dialogs are open and \(state.queue.count) wait; refused without asking"))
            }
            let request = ConfirmationCommand.Request(path: path, pathPrefix: pathPrefix, identity: identity, access: access)
            state.dialogs[key] = Dialog(request: request, waiters: [(process, completion)], queuedUntil: now + timeout)
            guard state.running < ConfirmationBroker.maximumDialogs else {
                state.queue.append(key)
                return .joined
            }
            state.running += 1
            return .start
        }
        switch role {
        case .known(let answer):
            completion(answer)
        case .joined:
            break
        case .start:
            let started = HelperThread.start { [self] in self.show(key, command) }
            if !started {
                let waiters = state.withLock { state in
                    state.running -= 1
                    return state.dialogs.removeValue(forKey: key)?.waiters ?? []
                }
                waiters.forEach { $0.completion(.unavailable("no thread could be started to ask")) }
            }
        }
    }

    /// Runs the dialog of `key`, then each queued one, until the queue is empty: at most
    /// `maximumDialogs` threads run this at once.
    private func show(_ first: RememberedConfirmations.Key, _ command: ConfirmationCommand) {
        var next: RememberedConfirmations.Key? = first
        while let key = next {
            guard let request = state.withLock({ $0.dialogs[key]?.request }) else { break }
            let answer = command.run(request)
            let waiters: [(process: RememberedConfirmations.Key?, completion: Completion)] = state.withLock { state in
                let waiters = state.dialogs.removeValue(forKey: key)?.waiters ?? []
                state.waiting -= max(waiters.count - 1, 0)
                let now = ContinuousClock.now
                if answer.allows {
                    for process in waiters.compactMap(\.process) {
                        state.remembered.remember(answer, for: process, until: now + rememberDuration, at: now)
                    }
                } else if answer.isRemembered {
                    state.remembered.remember(answer, for: key, until: now + refusalDuration, at: now)
                }
                return waiters
            }
            for waiter in waiters { waiter.completion(answer) }
            // The completions served the requests on this thread (a mount's read decrypts
            // here): what they left below this frame goes before the thread waits again.
            sodium_stackzero(ConfirmationBroker.servedStackBytes)
            next = nextQueued()
        }
    }

    /// The oldest queued dialog still within its wait, refusing those past it; nil (and one
    /// dialog fewer running) when none is left.
    private func nextQueued() -> RememberedConfirmations.Key? {
        var late: [Completion] = []
        let next: RememberedConfirmations.Key? = state.withLock { state in
            let now = ContinuousClock.now
            while !state.queue.isEmpty {
                let key = state.queue.removeFirst()
                guard let dialog = state.dialogs[key] else { continue }
                if dialog.queuedUntil > now { return key }
                state.dialogs[key] = nil
                state.waiting -= max(dialog.waiters.count - 1, 0)
                late += dialog.waiters.map(\.completion)
            }
            state.running -= 1
            return nil
        }
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        for completion in late {
            completion(.unavailable("no dialog was free within \(seconds) s; refused without asking"))
        }
        return next
    }

    /// Forgets every answer (a lock of the vault should: whoever unlocks is asked again).
    func forgetAll() {
        state.withLock { $0.remembered.forgetAll() }
    }

    var waitingRequests: Int { state.withLock { $0.waiting } }
}
