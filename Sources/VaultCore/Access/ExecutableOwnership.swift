import Glibc
import SystemCalls
import SystemPackage

/// Whether someone other than root could change which program an executable path runs, as
/// sshd's StrictModes judges a key file: the file and every directory above it, along the path
/// as given and along the path its links lead to, must belong to root and be writable by root
/// alone. A directory others may write is tolerated only when it is sticky (/tmp): there,
/// only an entry's owner may rename or remove it, and the entry below it must belong to root.
/// Group write is tolerated for root's group. (ACLs are not read: a directory made writable
/// through one passes.) For a mount of root, root's own files pass; for any other user, a file
/// or directory of the user fails, since the user's every program could rewrite or replace it.
public enum ExecutableOwnership {
    /// nil when only root can change the file at `path`, else why someone else can.
    public static func replaceableBy(_ path: String) -> String? {
        if let reason = checkChain(path) { return reason }
        guard let resolved = realpath(path, nil) else { return "\(path) cannot be resolved: \(Errno.last)" }
        defer { free(resolved) }
        let real = String(cString: resolved)
        return real == path ? nil : checkChain(real)
    }

    /// Each entry from "/" down to `path`, as lstat finds it (links not followed).
    private static func checkChain(_ path: String) -> String? {
        var prefixes = ["/"]
        var current = ""
        for component in path.split(separator: "/") {
            current += "/" + component
            prefixes.append(current)
        }
        for (index, prefix) in prefixes.enumerated() {
            var info = stat()
            guard lstat(prefix, &info) == 0 else { return "\(prefix) cannot be examined: \(Errno.last)" }
            let type = info.st_mode & S_IFMT
            // A link's own owner and mode change nothing: it can only be replaced, through the
            // directory above it, which is checked; what it leads to is checked by the caller.
            if type == S_IFLNK { continue }
            if info.st_uid != 0 {
                let whose = info.st_uid == getuid() ? "you" : "user \(info.st_uid)"
                return "\(prefix) belongs to \(whose), who can change it"
            }
            let isLast = index == prefixes.count - 1
            let sticky = type == S_IFDIR && info.st_mode & S_ISVTX != 0 && !isLast
            if info.st_mode & S_IWOTH != 0 && !sticky { return "\(prefix) is writable by everyone" }
            if info.st_mode & S_IWGRP != 0 && info.st_gid != 0 && !sticky {
                return "\(prefix) is writable by group \(info.st_gid)"
            }
        }
        return nil
    }
}
