import Admission
import CLinux
import Glibc
import SystemCalls
import VaultCore

/// The process that wrote bytes on the control socket, as the kernel attaches it to each
/// message (SCM_CREDENTIALS, and SCM_PIDFD where the kernel has it, which pins the very
/// process): not the one that connected, which may have exec'd another program since.
struct MessageSender: Sendable {
    let pid: pid_t
    let uid: uid_t
    let gid: gid_t
    let identity: ProcessIdentity

    /// Makes the kernel attach the writer to every message read from `fd` from now on (the
    /// credentials are recorded when written, so bytes already queued carry theirs too).
    static func enable(on fd: Int32) {
        var on: Int32 = 1
        setsockopt(fd, SOL_SOCKET, clinux_so_passcred(), &on, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(fd, SOL_SOCKET, clinux_so_passpidfd(), &on, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Receives into `buffer` (at most its size) and says who wrote what came. nil sender: the
    /// kernel attached none; a count of -1: the read failed.
    static func receive(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, sender: MessageSender?) {
        var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0, pidfd: Int32 = -1
        let count = (try? SystemCall.retrying { clinux_recv_with_sender(fd, buffer.baseAddress, buffer.count, &pid, &uid, &gid, &pidfd) }) ?? -1
        guard count > 0, pid > 0 else {
            if pidfd >= 0 { close(pidfd) }
            return (count, nil)
        }
        let identity = pidfd >= 0 ? ProcessIdentity(pid: pid, pidfd: pidfd) : ProcessIdentity(pid: pid)
        return (count, MessageSender(pid: pid, uid: uid, gid: gid, identity: identity))
    }

    /// Whether both name one writer (the same process).
    func isSameWriter(as other: MessageSender) -> Bool {
        pid == other.pid && uid == other.uid
    }

    /// As the access rules see it: a request whose process the kernel vouched for.
    var context: RequestContext {
        RequestContext(uid: uid, gid: gid, pid: pid, channel: .request, pinned: identity)
    }
}
