import SystemPackage

/// Why a principal or rule cannot be made; what the command line will report.
public enum AccessRuleError: Error, Equatable, Sendable, CustomStringConvertible {
    /// `--exe` needs an absolute path: a relative one would be resolved against the daemon's
    /// working directory, not the user's.
    case executableNotAbsolute(String)
    case executableNotFound(path: String, errno: Errno)
    case executableNotAFile(String)
    case invalidUnit(String)
    /// Someone other than root could rewrite or replace the file (`ExecutableOwnership`), and
    /// so take the rule's access; `allow --force` makes the rule anyway.
    case executableReplaceable(path: String, reason: String)

    public var description: String {
        switch self {
        case .executableNotAbsolute(let path):
            "\(path): an executable must be given by its absolute path"
        case .executableNotFound(let path, let code):
            "\(path): \(code)"
        case .executableNotAFile(let path):
            "\(path): not a regular file"
        case .executableReplaceable(let path, let reason):
            "\(path): \(reason), so the rule would admit whatever program is put there; install it where only root can write (or give --force)"
        case .invalidUnit(let name):
            "\(name): a unit name ends in .service or .scope and holds no '/'"
        }
    }
}
