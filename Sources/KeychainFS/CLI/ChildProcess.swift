import Daemon
import Glibc
import Support
import SystemCalls
import SystemPackage

/// The command `keychainfs exec` runs: spawned (posix_spawn, never fork() in a Swift
/// process), waited for, with the signals sent to exec passed on to it.
enum ChildProcess {
    enum Termination {
        case exited(Int32)
        case signaled(Int32)
    }

    /// Passed on to the command. Blocked in exec from before its secrets' directory exists,
    /// so that none of them ends exec before it has removed it.
    static let forwarded: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2]

    private static func waitedFor() -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in forwarded + [SIGCHLD] { sigaddset(&set, signal) }
        return set
    }

    /// Call before anything that must be undone; exec runs no other thread.
    static func blockSignals() {
        // An inherited SIG_IGN would have the kernel reap the child before we could wait.
        signal(SIGCHLD, SIG_DFL)
        var set = waitedFor()
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// A command that could not be started.
    struct SpawnFailure: Error {
        let command: String
        let code: Errno
        var message: String { "\(command): \(code)" }
        /// As in a shell: 127 for a command not found, 126 for one that cannot run.
        var exitStatus: Int32 { code == .noSuchFileOrDirectory ? 127 : 126 }
    }

    /// Starts `command` (looked up in PATH) with `environment`, default signal dispositions
    /// and an empty signal mask; each relay's pipe in place of its stream.
    static func spawn(_ command: [String], environment: [UnsafeMutablePointer<CChar>?],
                      relays: [StreamRelay] = []) throws(SpawnFailure) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for relay in relays { posix_spawn_file_actions_adddup2(&actions, relay.commandEnd, relay.target) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        Subprocess.defaultSignals(&attributes)
        let argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawnp(&pid, command[0], &actions, &attributes, argv, environment)
        guard rc == 0 else { throw SpawnFailure(command: command[0], code: Errno(rawValue: rc)) }
        return pid
    }

    /// Waits for `pid` to end, passing on each forwarded signal exec receives. One the
    /// terminal sent (Ctrl-C: from the kernel, to the whole foreground process group) has
    /// reached the command already and is not sent twice.
    static func wait(for pid: pid_t) -> Termination {
        var set = waitedFor()
        while true {
            var info = siginfo_t()
            guard let received = try? SystemCall.retrying({ sigwaitinfo(&set, &info) }) else { continue }
            if received != SIGCHLD {
                // SI_KERNEL (0x80): sent by the kernel, as a terminal's signals are.
                let fromTerminal = info.si_code == 0x80 && getpgid(pid) == getpgrp()
                if !fromTerminal { kill(pid, received) }
                continue
            }
            var status: Int32 = 0
            let reaped = waitpid(pid, &status, WNOHANG)
            guard reaped == pid else { continue }
            let low = status & 0x7F
            return low == 0 ? .exited((status >> 8) & 0xFF) : .signaled(low)
        }
    }

    /// Ends exec the way the command ended: its exit status, or the same signal.
    static func end(like termination: Termination) -> Never {
        switch termination {
        case .exited(let status):
            exit(status)
        case .signaled(let number):
            signal(number, SIG_DFL)
            var set = sigset_t()
            sigemptyset(&set)
            sigaddset(&set, number)
            pthread_sigmask(SIG_UNBLOCK, &set, nil)
            raise(number)
            // A signal whose default is to be ignored: the shell's convention.
            exit(128 + number)
        }
    }
}
