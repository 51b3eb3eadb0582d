/// Why a request was refused, for the log. It names the process (pid, executable, unit) and
/// never the path: a path is made of names, which are secrets.
public enum AccessDenial: Hashable, Sendable, CustomStringConvertible {
    /// The path's rule set has no rule for this process (or the process is gone, and matches
    /// nothing).
    case noRuleAdmits(pid: Int32, executable: String?, unit: String?)
    /// Only read-only rules admit this process, and it asked to write.
    case readOnly(pid: Int32, executable: String?, unit: String?)
    /// A rule names the process, and something other than its program may be reading through it.
    case doubted(pid: Int32, executable: String?, unit: String?, doubt: ProcessDoubt)
    /// An executable rule without `--confirm` names the process that opened a D-Bus connection:
    /// the bus cannot say which process speaks on it.
    case busCallerUnconfirmed(pid: Int32, executable: String?)
    /// A descriptor opened by one process is used by another that the rules do not admit.
    case descriptorOfAnother(pid: Int32, opener: Int32)
    /// A rule admits the process on confirmation, and there is no way to ask (no
    /// `--confirm-with`, or the command could not be run): the reason says which.
    case confirmationUnavailable(String)
    /// The confirmation command answered no (its exit status).
    case confirmationRefused(status: Int32)
    /// The confirmation command gave no answer in time and was stopped.
    case confirmationTimedOut(seconds: Double)

    public var description: String {
        switch self {
        case .noRuleAdmits(let pid, let executable, let unit):
            "no access rule admits process \(pid) (\(AccessDenial.describe(executable, unit)))"
        case .readOnly(let pid, let executable, let unit):
            "process \(pid) (\(AccessDenial.describe(executable, unit))) may only read here"
        case .doubted(let pid, let executable, let unit, let doubt):
            "process \(pid) (\(AccessDenial.describe(executable, unit))) is refused: \(doubt)"
        case .busCallerUnconfirmed(let pid, let executable):
            "process \(pid) (executable \(executable ?? "unknown")) opened this D-Bus connection; an --exe rule admits D-Bus callers only with --confirm, since the bus cannot tell which process speaks on a connection"
        case .descriptorOfAnother(let pid, let opener):
            "process \(pid) used a descriptor that process \(opener) opened, and no rule admits it"
        case .confirmationUnavailable(let reason):
            "access needs confirmation and cannot be confirmed: \(reason)"
        case .confirmationRefused(let status):
            "the confirmation command refused (exit status \(status))"
        case .confirmationTimedOut(let seconds):
            "the confirmation command gave no answer within \(seconds) s and was stopped"
        }
    }

    private static func describe(_ executable: String?, _ unit: String?) -> String {
        "executable \(executable ?? "unknown"), unit \(unit ?? "none")"
    }
}
