import Glibc
import VaultCore

/// Who asks: the process behind a request, as the kernel reports it.
struct RequestContext: Sendable {
    let uid: uid_t
    let gid: gid_t
    let pid: pid_t

    /// Requests the daemon makes of itself (none today) and tests of the driver's tables.
    static let daemon = RequestContext(uid: getuid(), gid: getgid(), pid: getpid())

    /// The process as access rules see it (its executable and unit, read from /proc only when
    /// a rule asks).
    func identity() -> ProcessIdentity { ProcessIdentity(pid: pid) }
}
