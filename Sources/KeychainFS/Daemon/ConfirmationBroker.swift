import Glibc
import Synchronization
import VaultCore

/// Asks the user, through the `--confirm-with` command, whether a process may have the access
/// a `confirm` rule lets it ask for, and remembers the answer for that process and rule.
///
/// Only the asking thread waits: the lock guards the tables alone and is never held while a
/// command runs, so other requests (other processes, other rules, and every request that
/// needs no confirmation) are served meanwhile. Requests of one process for one rule and kind
/// of access that come while its command runs wait for that command's answer instead of
/// starting their own dialog.
final class ConfirmationBroker: Sendable {
    static let defaultTimeout = Duration.seconds(30)
    static let defaultRememberDuration = Duration.seconds(300)

    private let command: ConfirmationCommand?
    private let pathPrefix: String
    private let rememberDuration: Duration
    private let state = Mutex(State())

    private struct State {
        var remembered = RememberedConfirmations()
        var pending: [RememberedConfirmations.Key: PendingConfirmation] = [:]
        /// Requests waiting for another's command to answer; tests watch it.
        var waiting = 0
    }

    /// - Parameters:
    ///   - command: the `--confirm-with` command; without one, every confirmation is refused,
    ///     saying so.
    ///   - pathPrefix: what `KEYCHAINFS_PATH` starts with (the mountpoint), the vault path after it.
    init(command: String?, pathPrefix: String, timeout: Duration = defaultTimeout,
         rememberDuration: Duration = defaultRememberDuration) {
        self.command = command.map { ConfirmationCommand(shellCommand: $0, timeout: timeout) }
        self.pathPrefix = pathPrefix
        self.rememberDuration = rememberDuration
    }

    /// Whether the user allows `identity` the `access` to `path` that `rule` makes it ask for.
    /// Blocks the calling thread until there is an answer (at most the timeout, plus the time
    /// to kill a command that gave none).
    func ask(path: VaultPath, identity: ProcessIdentity, access: Access, rule: AccessRule) -> Bool {
        answer(path: path, identity: identity, access: access, rule: rule).allows
    }

    /// A policy's decision with any confirmation it calls for settled: `.allow` or `.deny`.
    func settle(_ decision: AccessDecision, path: VaultPath, identity: ProcessIdentity, access: Access) -> AccessDecision {
        guard case .confirm(let rule) = decision else { return decision }
        return answer(path: path, identity: identity, access: access, rule: rule).decision
    }

    func answer(path: VaultPath, identity: ProcessIdentity, access: Access, rule: AccessRule) -> ConfirmationAnswer {
        guard let command else {
            return .unavailable("the mount was started without --confirm-with, so nobody can be asked")
        }
        guard let processID = identity.processID, let startTime = identity.startTime else {
            return .unavailable("process \(identity.pid) is gone")
        }
        let key = RememberedConfirmations.Key(processID: processID, startTime: startTime, rule: rule, access: access)

        enum Role {
            case known(ConfirmationAnswer)
            case wait(PendingConfirmation)
            case ask(PendingConfirmation)
        }
        let role: Role = state.withLock { state in
            if let answer = state.remembered.answer(for: key, at: .now) { return .known(answer) }
            if let pending = state.pending[key] {
                state.waiting += 1
                return .wait(pending)
            }
            let pending = PendingConfirmation()
            state.pending[key] = pending
            return .ask(pending)
        }

        switch role {
        case .known(let answer):
            return answer
        case .wait(let pending):
            let answer = pending.wait()
            state.withLock { $0.waiting -= 1 }
            return answer
        case .ask(let pending):
            let answer = command.run(.init(path: path, pathPrefix: pathPrefix, identity: identity, access: access))
            state.withLock { state in
                state.pending[key] = nil
                let now = ContinuousClock.now
                if answer.isRemembered { state.remembered.remember(answer, for: key, until: now + rememberDuration, at: now) }
            }
            pending.fulfil(answer)
            return answer
        }
    }

    /// Forgets every answer (a lock of the vault should: whoever unlocks is asked again).
    func forgetAll() {
        state.withLock { $0.remembered.forgetAll() }
    }

    var waitingRequests: Int { state.withLock { $0.waiting } }
}
