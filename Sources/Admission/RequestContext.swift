import Glibc
import VaultCore

/// Who asks: the process behind a request, as the kernel reports it, and the way in it took.
package struct RequestContext: Sendable {
    package let uid: uid_t
    let gid: gid_t
    package let pid: pid_t
    let channel: AccessChannel
    /// The process already pinned by the kernel's own pidfd (a control socket message).
    private let pinned: ProcessIdentity?

    package init(uid: uid_t, gid: gid_t, pid: pid_t, channel: AccessChannel = .request, pinned: ProcessIdentity? = nil) {
        self.uid = uid
        self.gid = gid
        self.pid = pid
        self.channel = channel
        self.pinned = pinned
    }

    /// Requests the daemon makes of itself (none today) and tests of the driver's tables.
    package static let daemon = RequestContext(uid: getuid(), gid: getgid(), pid: getpid())

    /// The process as access rules see it (its executable and unit, read from /proc only when
    /// a rule asks), pinned now if the kernel did not pin it already.
    func identity() -> ProcessIdentity { pinned ?? ProcessIdentity(pid: pid) }
}
