/// The files a decision's principals name, each stat'ed once per decision: fresh enough that a
/// replaced binary stops matching at the next request, and no more than one stat per path
/// however many rules name it.
struct FileIdentityCache {
    private var known: [String: FileIdentity?] = [:]

    mutating func identity(of path: String) -> FileIdentity? {
        if let identity = known[path] { return identity }
        let identity = FileIdentity.of(path: path)
        known[path] = identity
        return identity
    }
}
