import Glibc
import Support
import VaultCore

/// What admission tells the system log: refusals name the process, never the path.
extension DaemonLog.Event {
    package static func accessDenied(_ denial: AccessDenial) -> Self {
        Self(LOG_WARNING, "refused: \(denial)")
    }

    package static func confirmation(_ answer: ConfirmationAnswer, pid: pid_t) -> Self {
        Self(LOG_NOTICE, "confirmation for process \(pid): " + DaemonLog.describe(answer))
    }

    package static func accessRulesRefused(_ error: VaultError) -> Self {
        Self(LOG_ERR, "the access rules cannot be read, so every request is refused until they can: "
            + (error.errno == EIO ? "a rule record failed authentication or could not be read" : DaemonLog.errnoName(error.errno)))
    }

    /// The errno only, as for stores: nothing of an entry reaches the system log.
    package static func accessLogWriteFailed(_ error: VaultError, entries: Int) -> Self {
        Self(LOG_ERR, "cannot write \(entries) access log entries (\(DaemonLog.errnoName(error.errno))); they are kept and tried again")
    }
}

extension DaemonLog {
    package static func accessDenied(_ denial: AccessDenial) { record(.accessDenied(denial)) }
    package static func confirmationAnswered(_ answer: ConfirmationAnswer, pid: pid_t) { record(.confirmation(answer, pid: pid)) }
    package static func accessRulesRefused(_ error: VaultError) { record(.accessRulesRefused(error)) }
    /// A batch of the access log could not be committed.
    package static func accessLogWriteFailed(_ error: VaultError, entries: Int) { record(.accessLogWriteFailed(error, entries: entries)) }

    package static func describe(_ answer: ConfirmationAnswer) -> String {
        switch answer {
        case .allowed: "allowed"
        case .refused(let status): "refused (exit status \(status))"
        case .timedOut: "no answer in time, refused"
        case .unavailable(let reason): "refused: " + reason
        }
    }
}
