import CLinux
import CSodium
import Glibc
import Support
import SystemCalls
import SystemPackage
import VaultCore

/// The `--confirm-with` command: run through `sh -c` with the request in its environment,
/// exit 0 for yes. It runs in a process group of its own, with no descriptor of the daemon's
/// (not /dev/fuse, not the control socket) and with default signal handling; if it does not
/// answer within `timeout`, its whole group is killed (a dialog the shell started included,
/// unless it left the group) and the answer is no.
struct ConfirmationCommand: Sendable {
    let shellCommand: String
    let timeout: Duration

    /// What the command is told. The path is a secret (names are): it is built in memory that
    /// is wiped once the command has been started. The copy in the command's own environment
    /// is readable through /proc/PID/environ by the mounting user while the command runs;
    /// a dialog needs it, and that user may read the vault anyway.
    struct Request {
        let path: VaultPath
        let pathPrefix: String
        let identity: ProcessIdentity
        let access: Access
    }

    func run(_ request: Request) -> ConfirmationAnswer {
        let pid: pid_t
        switch spawn(request) {
        case .success(let spawned): pid = spawned
        case .failure(let code): return .unavailable("cannot run the confirmation command: \(Errno(rawValue: code))")
        }
        let opened = Result { () throws(Errno) in try SystemCall.once { clinux_pidfd_open(pid, 0) } }
        let pidfd = (try? opened.get()) ?? -1
        defer { if pidfd >= 0 { close(pidfd) } }
        if pidfd < 0 || !exits(pidfd, before: ContinuousClock.now + timeout) {
            kill(-pid, SIGKILL)
            kill(pid, SIGKILL)
            _ = reap(pid)
            if case .failure(let error) = opened { return .unavailable("cannot watch the confirmation command: \(error)") }
            return .timedOut(after: timeout)
        }
        let status = reap(pid)
        return status == 0 ? .allowed : .refused(status: status)
    }

    private enum Spawned {
        case success(pid_t)
        case failure(Int32)
    }

    private func spawn(_ request: Request) -> Spawned {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        Subprocess.nullStandardStreams(&actions)
        Subprocess.closeDescriptors(from: 3, &actions)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setpgroup(&attributes, 0)
        Subprocess.defaultSignals(&attributes, flags: POSIX_SPAWN_SETPGROUP)

        let argv: [UnsafeMutablePointer<CChar>?] = (["/bin/sh", "-c", shellCommand] as [String]).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }

        let ours = ConfirmationCommand.environment(for: request)
        defer { ours.forEach(ConfirmationCommand.wipeAndFree) }
        var environment: [UnsafeMutablePointer<CChar>?] = []
        var inherited = environ
        while let entry = inherited.pointee {
            // The daemon's own environment reaches a dialog (DISPLAY, WAYLAND_DISPLAY, DBUS_...);
            // a KEYCHAINFS_ variable of its own would stand beside ours and confuse the command.
            if strncmp(entry, "KEYCHAINFS_", 11) != 0 { environment.append(entry) }
            inherited += 1
        }
        environment += ours.map(Optional.some) + [nil]

        var pid: pid_t = 0
        let rc = posix_spawn(&pid, "/bin/sh", &actions, &attributes, argv, environment)
        return rc == 0 ? .success(pid) : .failure(rc)
    }

    private static func environment(for request: Request) -> [UnsafeMutablePointer<CChar>] {
        let identity = request.identity
        return [
            path(request),
            strdup("KEYCHAINFS_PID=\(identity.processID ?? identity.pid)")!,
            strdup("KEYCHAINFS_EXE=\(identity.executable?.path ?? "")")!,
            strdup("KEYCHAINFS_UNIT=\(identity.unit ?? "")")!,
            strdup("KEYCHAINFS_ACCESS=\(request.access)")!,
        ]
    }

    /// `KEYCHAINFS_PATH=PREFIX/NAME/NAME`, written byte by byte from the names' own memory so
    /// that no String (which cannot be wiped) ever holds it.
    private static func path(_ request: Request) -> UnsafeMutablePointer<CChar> {
        let head = Array("KEYCHAINFS_PATH=\(request.pathPrefix)".utf8)
        let components = request.path.components
        let length = head.count + components.reduce(0) { $0 + 1 + $1.count } + (components.isEmpty ? 1 : 0)
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: length + 1)
        var offset = 0
        func append(_ bytes: UnsafeRawBufferPointer) {
            (buffer + offset).update(from: bytes.bindMemory(to: UInt8.self).baseAddress!, count: bytes.count)
            offset += bytes.count
        }
        head.withUnsafeBytes(append)
        if components.isEmpty { [UInt8(ascii: "/")].withUnsafeBytes(append) }
        for name in components {
            [UInt8(ascii: "/")].withUnsafeBytes(append)
            name.withUnsafeBytes(append)
        }
        buffer[offset] = 0
        return UnsafeMutableRawPointer(buffer).bindMemory(to: CChar.self, capacity: length + 1)
    }

    private static func wipeAndFree(_ entry: UnsafeMutablePointer<CChar>) {
        sodium_memzero(entry, strlen(entry))
        free(entry)
    }

    /// Whether the process behind `pidfd` exits before `deadline`.
    private func exits(_ pidfd: Int32, before deadline: ContinuousClock.Instant) -> Bool {
        let remaining = deadline - ContinuousClock.now
        guard remaining > .zero, let ready = try? SystemCall.poll(pidfd, for: Int16(POLLIN), within: remaining) else { return false }
        return ready != 0
    }

    /// Its exit status, or 128 + the signal that ended it.
    private func reap(_ pid: pid_t) -> Int32 {
        guard let status = try? SystemCall.waitStatus(of: pid) else { return -1 }
        return Subprocess.exitStatus(status)
    }
}
