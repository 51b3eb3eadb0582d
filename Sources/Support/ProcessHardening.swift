import CLinux
import Glibc
import SystemCalls
import SystemPackage

/// Every keychainfs process may hold keys: no core dumps, no ptrace attach by the same user,
/// private file modes, and as much locked memory as the hard limit allows. And one name.
package enum ProcessHardening {
    /// The umask keychainfs was started with, for the command `exec` runs.
    nonisolated(unsafe) package static var inheritedUmask: mode_t = 0o022

    package static func apply() {
        _ = clinux_set_dumpable(0)
        var noCore = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &noCore)
        var memlock = rlimit()
        if getrlimit(__rlimit_resource_t(__RLIMIT_MEMLOCK.rawValue), &memlock) == 0, memlock.rlim_cur < memlock.rlim_max {
            memlock.rlim_cur = memlock.rlim_max
            _ = setrlimit(__rlimit_resource_t(__RLIMIT_MEMLOCK.rawValue), &memlock)
        }
        inheritedUmask = umask(0o077)
        // A background daemon runs as /proc/self/exe: keep the name users and the bus see.
        _ = clinux_set_process_name("keychainfs")
    }

    /// `keychainfs exec` asking a mount for secrets holds no key: it makes itself dumpable again
    /// (core dumps stay off) so that a daemon of a user other than root may read its
    /// `/proc/PID/exe` and judge it by a rule on the keychainfs binary; for a process that is
    /// not dumpable only root can. What that opens to a process of the same user (ptrace, where
    /// `ptrace_scope` lets it) is what it already has: the secrets exec takes go into the
    /// command's environment or files, which that process reads in /proc or the directory, and
    /// a rule on keychainfs admits whatever command that process runs through exec itself.
    /// Not when the kernel set AT_SECURE (keychainfs installed setuid or setgid): that
    /// protection is the installer's choice and stays.
    package static func allowInspectionWithoutKeys() {
        guard clinux_secure_execution() == 0 else { return }
        if clinux_set_dumpable(1) == 0 { madeInspectable = true }
    }

    /// Whether `allowInspectionWithoutKeys` made this process dumpable; single-threaded use.
    nonisolated(unsafe) private static var madeInspectable = false

    /// Before this process takes a passphrase or a key: not dumpable again, and nobody who
    /// attached while it was (an attachment outlives PR_SET_DUMPABLE 0). A tracer there from
    /// the start (`strace keychainfs ...`) is its starter's business, as for any command.
    package static func closeInspectionBeforeKeys() throws(CommandFailure) {
        guard madeInspectable else { return }
        _ = clinux_set_dumpable(0)
        madeInspectable = false
        guard let line = statusLine("TracerPid:") else {
            throw CommandFailure(message: "cannot tell whether this process is being traced (/proc/self/status)", status: .failure)
        }
        let tracer = String(decoding: line.dropFirst("TracerPid:".utf8.count).filter { $0 != 0x20 && $0 != 0x09 }, as: UTF8.self)
        guard tracer == "0" else {
            throw CommandFailure(message: "process \(tracer) is tracing this one: no passphrase is taken under a debugger", status: .failure)
        }
    }

    /// The line of /proc/self/status that starts with `prefix`.
    private static func statusLine(_ prefix: String) -> [UInt8]? {
        guard let contents = try? FileDescriptor.contents(of: "/proc/self/status") else { return nil }
        return contents.split(separator: 0x0A).first { $0.starts(with: Array(prefix.utf8)) }.map(Array.init)
    }
}
