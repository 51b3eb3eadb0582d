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

    /// `mkdir -p` of the directories above `path` (not `path` itself), each made with
    /// `permissions` where missing; the first that cannot be made is named in the failure.
    package static func makeParentDirectories(of path: String, permissions: FilePermissions) throws(DirectoryFailure) {
        var prefix = ""
        for component in path.split(separator: "/", omittingEmptySubsequences: true).dropLast() {
            prefix += (prefix.isEmpty && !path.hasPrefix("/") ? "" : "/") + component
            do {
                try makeDirectoryIfMissing(prefix, permissions: permissions)
            } catch {
                throw DirectoryFailure(directory: prefix, errno: error)
            }
        }
    }
}

/// A directory `makeParentDirectories` could not make, and why.
package struct DirectoryFailure: Error {
    package let directory: String
    package let errno: Errno
}
