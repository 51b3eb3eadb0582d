import Glibc
import SystemPackage

extension SystemCall {
    /// mkdir(2), where a name already there is no failure (as `mkdir -p` treats it): the
    /// callers check what they found, or let the next step fail on it.
    package static func makeDirectoryIfMissing(_ path: String, permissions: FilePermissions) throws(Errno) {
        do {
            try retrying { mkdir(path, permissions.rawValue) }
        } catch .fileExists {
            return
        }
    }
}
