import Glibc

/// Why a principal or rule cannot be made; what the command line will report.
public enum AccessRuleError: Error, Equatable, Sendable, CustomStringConvertible {
    /// `--exe` needs an absolute path: a relative one would be resolved against the daemon's
    /// working directory, not the user's.
    case executableNotAbsolute(String)
    case executableNotFound(path: String, errno: Int32)
    case executableNotAFile(String)
    case invalidUnit(String)

    public var description: String {
        switch self {
        case .executableNotAbsolute(let path):
            "\(path): an executable must be given by its absolute path"
        case .executableNotFound(let path, let code):
            "\(path): \(String(cString: strerror(code)))"
        case .executableNotAFile(let path):
            "\(path): not a regular file"
        case .invalidUnit(let name):
            "\(name): a unit name ends in .service or .scope and holds no '/'"
        }
    }
}
