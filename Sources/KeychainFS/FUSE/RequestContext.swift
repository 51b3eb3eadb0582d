import Glibc

/// Who asks: the process behind a request, as the kernel reports it. The executable and the
/// cgroup cost a /proc read each, so they are resolved only when something (an access rule)
/// needs them, and at most once per request.
struct RequestContext {
    let uid: uid_t
    let gid: gid_t
    let pid: pid_t

    /// The executable as the kernel records it: the device and inode `/proc/PID/exe` leads to.
    /// Never `comm` or `argv`, which a process sets for itself.
    struct Executable: Equatable {
        let device: UInt64
        let inode: UInt64
    }

    /// Requests the daemon makes of itself (none today) and tests of the driver's tables.
    static let daemon = RequestContext(uid: getuid(), gid: getgid(), pid: getpid())

    /// nil when the process is gone or its executable cannot be reached.
    func executable() -> Executable? {
        var info = stat()
        guard stat("/proc/\(pid)/exe", &info) == 0 else { return nil }
        return Executable(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// The cgroup v2 path (`/user.slice/.../app.slice/foo.service`), nil when unknown.
    func cgroup() -> String? {
        let fd = open("/proc/\(pid)/cgroup", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 4096)
        let count = read(fd, &bytes, bytes.count)
        guard count > 0 else { return nil }
        // The unified hierarchy's line is "0::PATH".
        for line in bytes[..<count].split(separator: 0x0A) where line.starts(with: Array("0::".utf8)) {
            return String(decoding: line.dropFirst(3), as: UTF8.self)
        }
        return nil
    }
}
