import CLinux
import Glibc

/// Every keychainfs process may hold keys: no core dumps, no ptrace attach by the same user,
/// private file modes, and as much locked memory as the hard limit allows. And one name.
enum ProcessHardening {
    /// The umask keychainfs was started with, for the command `exec` runs.
    nonisolated(unsafe) static var inheritedUmask: mode_t = 0o022

    static func apply() {
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
}
