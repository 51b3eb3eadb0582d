import Glibc

/// The files a decision's principals name, each stat'ed once per decision: fresh enough that a
/// replaced or rewritten binary stops matching at the next request, and no more than one stat
/// per path however many rules name it.
struct FileIdentityCache {
    /// What one stat of a principal's file says.
    struct Found {
        let identity: FileIdentity
        let fingerprint: FileFingerprint
        /// The group a setgid file gives its processes; nil for a file that is not setgid.
        let setgidGroup: gid_t?
    }

    private var known: [String: Found?] = [:]

    mutating func identity(of path: String) -> Found? {
        if let known = known[path] { return known }
        var info = stat()
        let found = stat(path, &info) == 0
            ? Found(identity: FileIdentity(info), fingerprint: FileFingerprint(info),
                    setgidGroup: info.st_mode & S_ISGID != 0 ? info.st_gid : nil)
            : nil
        known[path] = found
        return found
    }
}
