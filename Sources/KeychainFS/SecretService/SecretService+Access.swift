import Glibc
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
        let caller = RequestContext(uid: credentials.uid, gid: getgid(), pid: credentials.pid)
        callers[sender] = (caller, ProcessIdentity(pid: credentials.pid).startTime)
        return caller
    }

    /// Judges each group of checks (one group per object a call touches) and calls `then` on
    /// the loop thread with each group's outcome: nil where allowed, else the error. A group
    /// that needs confirmation is asked on a helper thread, so the bus keeps serving while
    /// the user decides, and judged again once answered: the rules may have changed meanwhile.
    func authorize(_ groups: [[AccessCheck]], for caller: RequestContext,
                   then: @escaping @Sendable ([VaultError?]) -> Void) {
        var outcomes: [VaultError?] = []
        var pending: [(index: Int, accesses: [AccessGate.PendingAccess])] = []
        for (index, checks) in groups.enumerated() {
            switch gate.evaluate(checks, caller) {
            case .allowed:
                outcomes.append(nil)
            case .refused(let error):
                outcomes.append(error)
            case .needsConfirmation(let accesses):
                outcomes.append(nil)
                pending.append((index, accesses))
            }
        }
        guard !pending.isEmpty else { return then(outcomes) }
        let waiting = pending
        let decided = outcomes
        let started = HelperThread.start { [self] in
            var answered = decided
            for (index, accesses) in waiting {
                answered[index] = decision(after: accesses, on: groups[index], for: caller)
            }
            let final = answered
            bus.post { then(final) }
        }
        if !started {
            var refused = outcomes
            for (index, _) in waiting { refused[index] = .accessDenied(.confirmationUnavailable("no thread to ask on")) }
            then(refused)
        }
    }

    /// Asks the user, then decides again, as a request through the mount is: the rules may
    /// have changed while the user was asked (answers given are remembered, so nobody is
    /// asked twice for one call). nil when allowed. Blocks: helper threads only.
    private func decision(after pending: [AccessGate.PendingAccess], on checks: [AccessCheck],
                          for caller: RequestContext) -> VaultError? {
        if let denial = gate.confirm(pending) { return .accessDenied(denial) }
        switch gate.evaluate(checks, caller) {
        case .allowed: return nil
        case .refused(let error): return error
        case .needsConfirmation(let again): return gate.confirm(again).map { .accessDenied($0) }
        }
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
