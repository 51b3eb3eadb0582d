import Admission
import DBus
import Glibc
import Locking
import Synchronization
import VaultCore

/// Who calls, as the bus daemon reports it, and what the vault's access rules let them do:
/// the same gate, confirmations and log as a process using the mount.
extension SecretService {
    /// The caller's process, asked of the bus daemon once per connection (a unique name is
    /// never reused). Only the vault's owner, or root, is served at all, as on the mount.
    /// The process's start time is kept with it: should the process end while a descendant
    /// keeps its connection, its pid may be another program's, and nothing is served then.
    func identify(_ sender: String) throws(BusError) -> RequestContext {
        if let known = callers[sender] {
            guard ProcessIdentity(pid: known.context.pid).startTime == known.startTime else {
                throw .accessDenied("the process that opened this connection has ended")
            }
            return known.context
        }
        let credentials = try bus.credentials(of: sender)
        guard credentials.uid == getuid() || credentials.uid == 0 else {
            throw .accessDenied("only the vault's owner may use this service")
        }
        // The group plays no part in the rules; the service's own stands in.
        let caller = RequestContext(uid: credentials.uid, gid: getgid(), pid: credentials.pid, channel: .busConnection)
        callers[sender] = (caller, ProcessIdentity(pid: credentials.pid).startTime)
        return caller
    }

    /// Judges each group of checks (one group per object a call touches) and calls `then` on
    /// the loop thread with each group's outcome: nil where allowed, else the error. A group
    /// that needs confirmation is answered from the dialog's thread, so the bus keeps serving
    /// while the user decides; `then` runs once every group is decided.
    func authorize(_ groups: [[AccessCheck]], for caller: RequestContext,
                   then: @escaping @Sendable ([VaultError?]) -> Void) {
        // One count per group, and one for this loop, so no answer is delivered before every
        // group was at least judged.
        let outcomes = OrderedMutex<(decided: [VaultError?], waiting: Int)>(.secretServiceOutcomes, (Array(repeating: nil, count: groups.count), groups.count + 1))
        // Records a group's outcome (nil index: this loop is done); every outcome once all are in.
        let settle: @Sendable (Int?, VaultError?) -> [VaultError?]? = { index, refusal in
            outcomes.withLock { state in
                if let index { state.decided[index] = refusal }
                state.waiting -= 1
                return state.waiting == 0 ? state.decided : nil
            }
        }
        for (index, checks) in groups.enumerated() {
            let admittance = gate.admit(checks, caller) { [bus] refusal in
                if let final = settle(index, refusal) { bus.post { then(final) } }
            }
            switch admittance {
            case .asking: continue
            case .admitted: _ = settle(index, nil)
            case .refused(let error): _ = settle(index, error)
            }
        }
        // Every group answered at once: answer now (on the loop thread, this one).
        if let final = settle(nil, nil) { then(final) }
    }

    /// One object's checks: `body` runs on the loop thread if they pass, else the call gets
    /// the error.
    func authorize(_ call: BusCall, _ checks: [AccessCheck], for caller: RequestContext,
                   _ body: @escaping @Sendable () throws(BusError) -> Void) {
        authorize([checks], for: caller) { outcomes in
            do throws(BusError) {
                if let error = outcomes[0] { throw BusError(error) }
                try body()
            } catch {
                if !call.hasReplied { call.replyError(error) }
            }
        }
    }

    /// Whether a search may show the caller this object: no rule refuses it. One that asks
    /// for a confirmation lets it be found (the secret's read asks); a dialog for every
    /// search would be noise.
    func mayFind(_ checks: [AccessCheck], for caller: RequestContext) -> Bool {
        if case .refused = gate.evaluate(checks, caller) { return false }
        return true
    }
}
