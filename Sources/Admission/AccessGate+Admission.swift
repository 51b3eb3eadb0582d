import Glibc
import Support
import VaultCore

/// The one admission path: the mount, the control socket and the Secret Service each hand
/// their checks and their caller here, and get back allowed, refused, or (for a `--confirm`
/// rule) an answer later, on a thread of the gate's. Each way in only unpacks its request and
/// serves it; who asks, the rules, the dialog and the log are decided here once.
extension AccessGate {
    /// What `admit` could say at once.
    package enum Admittance: Sendable {
        case admitted
        case refused(VaultError)
        /// The user is being asked; `answered` will be called on the asking thread.
        case asking
    }

    /// Judges `checks` for `caller`. A confirmation is asked without holding a thread (the
    /// broker calls back from the dialog's), then the checks are judged again (the rules may
    /// have changed while the user was asked; answers given are remembered, so nobody is asked
    /// twice for one request), and `answered` gets nil (admitted) or the refusal: on the
    /// dialog's thread, or on this one before `admit` returns when the answer was known.
    package func admit(_ checks: [AccessCheck], _ caller: RequestContext,
               answered: @escaping @Sendable (VaultError?) -> Void) -> Admittance {
        switch evaluate(checks, caller) {
        case .allowed: return .admitted
        case .refused(let error): return .refused(error)
        case .needsConfirmation(let pending):
            confirm(pending[...]) { [self] denial in
                if let denial { return answered(.accessDenied(denial)) }
                switch evaluate(checks, caller) {
                case .allowed: answered(nil)
                case .refused(let error): answered(error)
                case .needsConfirmation(let again): confirm(again[...]) { answered($0.map { .accessDenied($0) }) }
                }
            }
            return .asking
        }
    }

    /// `admit`, waiting for the user on the caller's own thread (one that serves a single
    /// client, such as a control socket connection's).
    package func admitWaiting(_ checks: [AccessCheck], _ caller: RequestContext) -> VaultError? {
        let answer = PendingAnswer<VaultError?>()
        switch admit(checks, caller, answered: { answer.fulfil($0) }) {
        case .admitted: return nil
        case .refused(let error): return error
        case .asking: return answer.wait()
        }
    }

    /// A read or write through a descriptor, judged like the open that made it: a descriptor
    /// that reached another program (passed over a socket, taken with pidfd_getfd, kept across
    /// an exec) serves it only if the rules admit that program too. A `--confirm` rule's answer
    /// covers the process that opened the descriptor, not whoever holds it later. Never asks.
    package func admitUse(_ check: AccessCheck, _ caller: RequestContext, opener: pid_t) -> VaultError? {
        switch evaluate([check], caller) {
        case .allowed:
            return nil
        case .refused(let error):
            return error
        case .needsConfirmation(let pending):
            let user = pending[0].identity
            if user.pid == opener || user.processID == ProcessIdentity(pid: opener).processID { return nil }
            let denial = AccessDenial.descriptorOfAnother(pid: caller.pid, opener: opener)
            DaemonLog.accessDenied(denial)
            log?.record(pid: caller.pid, access: LoggedAccess(check.access), decision: .denied(reason: denial.description),
                        node: pending[0].node)
            return .accessDenied(denial)
        }
    }
}
