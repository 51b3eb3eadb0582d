/// Why a request was refused, for the log. It names the process (pid, executable, unit) and
/// never the path: a path is made of names, which are secrets.
public enum AccessDenial: Hashable, Sendable, CustomStringConvertible {
    /// The path's rule set has no rule for this process (or the process is gone, and matches
    /// nothing).
    case noRuleAdmits(pid: Int32, executable: String?, unit: String?)
    /// Only read-only rules admit this process, and it asked to write.
    case readOnly(pid: Int32, executable: String?, unit: String?)
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
