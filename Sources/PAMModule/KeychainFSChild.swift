import CPAM
import Glibc

/// Runs `keychainfs pam-...` from the PAM host: a fresh process, which drops to the user itself
/// before anything else (the host keeps its privileges; a forked copy of a threaded host such as
/// gdm may call nothing but async-signal-safe functions before exec, and initgroups is not one).
/// The secrets go on pipes, one per descriptor from 0 then 3 up, never in argv or the environment;
/// what the child writes on stderr becomes the one log line.
struct KeychainFSChild {
    let program: String
    let handle: OpaquePointer

    init(program: String, handle: OpaquePointer) {
        self.program = program
        self.handle = handle
    }

    func run(_ arguments: [String], secrets: [UnsafePointer<CChar>], name: String) {
        guard access(program, X_OK) == 0 else {
            PAMHandle.log(handle, LOG_ERR, "cannot run \(program) for the \(name): not an executable")
            return
        }
        var secretPipes: [[Int32]] = []
        defer { for fds in secretPipes { for fd in fds where fd >= 0 { close(fd) } } }
        for _ in secrets {
            var fds: [Int32] = [-1, -1]
            guard Self.pipeClosedOnExec(&fds) else { return log(failure: "cannot create a pipe") }
            secretPipes.append(fds)
        }
        var errorPipe: [Int32] = [-1, -1]
        guard Self.pipeClosedOnExec(&errorPipe) else { return log(failure: "cannot create a pipe") }
        defer { if errorPipe[0] >= 0 { close(errorPipe[0]) } }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (index, fds) in secretPipes.enumerated() {
            posix_spawn_file_actions_adddup2(&actions, fds[0], index == 0 ? 0 : Int32(index + 2))
        }
        if secrets.count < 1 { posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, errorPipe[1], 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var environment = ["PATH=/usr/local/bin:/usr/bin:/bin"]
        if let runtime = PAMHandle.environment(handle, "XDG_RUNTIME_DIR") { environment.append("XDG_RUNTIME_DIR=" + runtime) }
        let argv: [UnsafeMutablePointer<CChar>?] = ([program] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
        defer { (argv + envp).forEach { free($0) } }

        // The host may reap its children itself (sshd's SIGCHLD handler): this one is waited for here.
        var previous = sigaction()
        var byDefault = sigaction()
        byDefault.__sigaction_handler.sa_handler = SIG_DFL
        sigaction(SIGCHLD, &byDefault, &previous)
        defer { sigaction(SIGCHLD, &previous, nil) }

        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, program, &actions, &attributes, argv, envp)
        close(errorPipe[1])
        for index in secretPipes.indices {
            close(secretPipes[index][0])
            secretPipes[index][0] = -1
        }
        guard spawned == 0 else { return log(failure: "cannot run \(program): \(String(cString: strerror(spawned)))") }
        // A password is far shorter than a pipe's buffer: these writes do not wait on the child.
        let ignoredPipe = signal(SIGPIPE, SIG_IGN)
        for (index, secret) in secrets.enumerated() {
            var offset = 0
            let length = strlen(secret)
            while offset < length {
                let written = write(secretPipes[index][1], secret + offset, length - offset)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { break }
                offset += written
            }
            close(secretPipes[index][1])
            secretPipes[index][1] = -1
        }
        signal(SIGPIPE, ignoredPipe)
        guard let message = readMessage(errorPipe[0]) else {
            // A login waits for nothing longer than this: the child is stopped and the keychain left as it is.
            kill(pid, SIGKILL)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            return log(failure: "keychainfs \(arguments[0]) did not finish within \(Self.timeLimit) s; stopped")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exitStatus = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        switch exitStatus {
        case 0: if !message.isEmpty { PAMHandle.log(handle, LOG_INFO, message) }
        // Exit status 2: the vault's passphrase is not this password. The vault is left as it was.
        case 2: PAMHandle.log(handle, LOG_NOTICE, message.isEmpty ? "the vault's passphrase is not the login password" : message)
        default: log(failure: message.isEmpty ? "keychainfs \(arguments[0]) failed (status \(exitStatus))" : message)
        }
    }

    /// pipe2 is a GNU extension Swift's Glibc does not show; the descriptors must not reach
    /// other programs the host runs.
    private static func pipeClosedOnExec(_ fds: inout [Int32]) -> Bool {
        guard pipe(&fds) == 0 else { return false }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return true
    }

    private func log(failure: String) {
        PAMHandle.log(handle, LOG_ERR, failure)
    }

    /// How long a login or password change waits for the child, in seconds: an Argon2id or two and a mount.
    static let timeLimit = 30

    /// The child's stderr up to its end, at most a few lines' worth, as one line; nil when it
    /// has not ended within the time limit.
    private func readMessage(_ fd: Int32) -> String? {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1024)
        var start = timespec()
        clock_gettime(CLOCK_MONOTONIC, &start)
        while true {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let left = Self.timeLimit * 1000 - (now.tv_sec - start.tv_sec) * 1000 - (now.tv_nsec - start.tv_nsec) / 1_000_000
            guard left > 0 else { return nil }
            var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let polled = poll(&ready, 1, Int32(left))
            if polled < 0 && errno == EINTR { continue }
            guard polled > 0 else { return polled == 0 ? nil : "" }
            let got = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { break }
            if bytes.count < 2048 { bytes += chunk[0..<got] }
        }
        let text = String(decoding: bytes.prefix(2048), as: UTF8.self)
        return text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters() }.filter { !$0.isEmpty }.joined(separator: "; ")
    }
}

private extension Substring {
    func trimmingCharacters() -> String {
        String(self.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
