import VaultCore

/// What came of asking the user (through `--confirm-with`) whether a process may have access.
package enum ConfirmationAnswer: Equatable, Sendable {
    /// The command exited 0.
    case allowed
    /// The command exited with another status (128 + the signal when a signal ended it).
    case refused(status: Int32)
    /// The command gave no answer in time and was killed.
    case timedOut(after: Duration)
    /// Nobody could be asked: no command, the command could not be run, or the process is gone
    /// (an answer could not be tied to it).
    case unavailable(String)

    var allows: Bool { self == .allowed }

    /// Whether the answer stands for the remember duration. The user's answers do, a timeout
    /// too (a dialog nobody answers should not come back at every request); not a failure to
    /// ask, which the next request tries again.
    var isRemembered: Bool {
        if case .unavailable = self { return false }
        return true
    }

    var decision: AccessDecision {
        switch self {
        case .allowed: .allow
        case .refused(let status): .deny(.confirmationRefused(status: status))
        case .timedOut(let after): .deny(.confirmationTimedOut(seconds: Double(after.components.seconds)
                                                                  + Double(after.components.attoseconds) / 1e18))
        case .unavailable(let reason): .deny(.confirmationUnavailable(reason))
        }
    }
}
