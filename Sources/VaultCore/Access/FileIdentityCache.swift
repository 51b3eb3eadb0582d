import Glibc

/// The files a decision's principals name, each stat'ed once per decision: fresh enough that a
/// replaced or rewritten binary stops matching at the next request, and no more than one stat
/// per path however many rules name it.
struct FileIdentityCache {
    private var known: [String: (FileIdentity, FileFingerprint)?] = [:]

    mutating func identity(of path: String) -> (identity: FileIdentity, fingerprint: FileFingerprint)? {
        if let known = known[path] { return known }
        var info = stat()
        let found = stat(path, &info) == 0 ? (FileIdentity(info), FileFingerprint(info)) : nil
        known[path] = found
        return found
    }
}
