import CLinux
import Glibc
import SystemCalls
import SystemPackage

/// Runs helper programs (fusermount3) and reports their status and standard error.
package enum Subprocess {
    package struct Outcome {
        package let status: Int32
        package let errorOutput: String

        package init(status: Int32, errorOutput: String) {
            self.status = status
            self.errorOutput = errorOutput
        }
    }

    /// `standardInput`: a descriptor the child reads as fd 0 (a pipe holding a passphrase), else /dev/null.
    package static func run(_ executable: String, _ arguments: [String], standardInput: Int32? = nil) -> Outcome {
        var errPipe: [Int32] = [0, 0]
        guard pipe(&errPipe) == 0 else { return Outcome(status: -1, errorOutput: "cannot create a pipe") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let standardInput {
            posix_spawn_file_actions_adddup2(&actions, standardInput, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        posix_spawn_file_actions_addclose(&actions, errPipe[0])
        posix_spawn_file_actions_addclose(&actions, errPipe[1])
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawnp(&pid, executable, &actions, nil, argv, environ)
        close(errPipe[1])
        defer { close(errPipe[0]) }
        guard rc == 0 else { return Outcome(status: -1, errorOutput: "cannot run \(executable): \(Errno(rawValue: rc))") }
        let output = (try? FileDescriptor(rawValue: errPipe[0]).readToEnd()) ?? []
        let status = (try? SystemCall.waitStatus(of: pid)) ?? 0
        return Outcome(status: exitStatus(status), errorOutput: String(decoding: output, as: UTF8.self))
    }

    /// A waitpid status as a shell reports it: the exit status, or 128 + the signal that ended it.
    package static func exitStatus(_ waitStatus: Int32) -> Int32 {
        (waitStatus & 0x7F) == 0 ? (waitStatus >> 8) & 0xFF : 128 + (waitStatus & 0x7F)
    }

    /// A child starts with no signal blocked and every handler at its default, whatever the
    /// spawning thread blocks (helper threads, Swift Testing's dispatch threads) or handles.
    package static func defaultSignals(_ attributes: inout posix_spawnattr_t, flags: Int32 = 0) {
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | flags))
    }

    /// Every descriptor from `lowest` up closed in the child: a descriptor another thread
    /// opened without close-on-exec (or a test's pipe) must not outlive the spawn in it.
    package static func closeDescriptors(from lowest: Int32, _ actions: inout posix_spawn_file_actions_t) {
        _ = clinux_spawn_close_from(&actions, lowest)
    }

    /// Standard input, output and error of a spawned child on /dev/null: a daemon's children
    /// must not hold its launcher's terminal or pipes.
    package static func nullStandardStreams(_ actions: inout posix_spawn_file_actions_t) {
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    }
}
