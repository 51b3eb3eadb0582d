import Glibc

/// Whether the mounting user (this process's user) can change a file: own it, or share a
/// group that may write it, or anyone may. Root owns the system: a root mount does not count
/// root's own files, or nothing installed would be admissible.
enum WritableByUser {
    static func file(_ info: stat) -> Bool {
        let user = getuid()
        if info.st_uid == user && user != 0 { return true }
        if info.st_mode & S_IWOTH != 0 { return true }
        if info.st_mode & S_IWGRP != 0 && info.st_gid != 0 && userGroups.contains(info.st_gid) { return true }
        return false
    }

    /// This process's groups, read once: a daemon's groups do not change.
    static let userGroups: Set<gid_t> = {
        var groups = [gid_t](repeating: 0, count: Int(NGROUPS_MAX) + 1)
        let count = getgroups(Int32(groups.count), &groups)
        return Set(groups[..<Int(max(count, 0))]).union([getgid()])
    }()
}
