import Glibc
import Support
import VaultCore

/// Going to the background without fork(): the Swift runtime may already run threads, so we
/// re-execute ourselves as the daemon (gocryptfs does the same) in a new session, hand it the
/// passphrase through a pipe, and return once it reports that the mount serves requests.
enum BackgroundLaunch {
    static func launch(_ request: MountRequest) throws(CommandFailure) {
        let mountpoint = try Mountpoint.check(request.mountpoint)
        let vaultPath = Mountpoint.absolute(request.vault.resolvedVaultPath)
        let creating = try MountRequest.createsVault(at: vaultPath)
        let passphrase: SecureBuffer
        do throws(VaultError) {
            passphrase = try request.vault.passphrase(prompt: creating ? "New passphrase for \(vaultPath): " : "Passphrase: ",
                                                      confirm: creating)
        } catch {
            throw CommandFailure(error)
        }

        let ready = try makePipe(), secret = try makePipe()
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        Subprocess.nullStandardStreams(&actions)
        posix_spawn_file_actions_adddup2(&actions, ready.write, 3)
        posix_spawn_file_actions_adddup2(&actions, secret.read, 4)

        // A PostgreSQL URI may carry a password, and a process's arguments are anyone's to read
        // (/proc/PID/cmdline) for as long as the mount lasts; its environment is its owner's only.
        let vaultByEnvironment = VaultLocation.isPostgreSQL(vaultPath)
        var arguments = ["keychainfs", "mount", "--ready-fd", "3", "--passphrase-fd", "4"]
            + (vaultByEnvironment ? [] : ["--vault", vaultPath]) + ["--kdf", request.kdf.rawValue]
            + (request.idleLockSeconds.map { ["--idle-lock", "\($0)s"] } ?? [])
            + (request.confirmCommand.map { ["--confirm-with", $0] } ?? [])
            + ["--confirm-remember", "\(request.confirmRememberSeconds)s", "--confirm-timeout", "\(request.confirmTimeoutSeconds)"]
            + ["--log-days", "\(request.accessLog.days)", "--log-entries", "\(request.accessLog.entries)"]
            + (request.secretService ? ["--secret-service"] : []) + (request.replaceSecretService ? ["--replace"] : [])
            + (request.lockOnScreenLock ? ["--lock-on-screen-lock"] : [])
            + (request.vault.secret.passphraseCommand.map { ["--extpass", $0] } ?? [])
            + (request.vault.resolvedMemberKeyPath.map { ["--member-key", MemberKeyOptions.absolute($0)] } ?? [])
            + [mountpoint]
        // Before the mountpoint, on a line of its own: one more term is too many for the type checker.
        arguments.insert(contentsOf: request.kernelOptions.flatMap { ["--kernel-option", $0] }, at: arguments.count - 1)
        if request.syncEveryChange { arguments.insert("--sync", at: arguments.count - 1) }
        if request.vault.acceptRollback { arguments.insert("--accept-rollback", at: arguments.count - 1) }
        if let window = request.syncWindowMilliseconds { arguments.insert(contentsOf: ["--sync-window-ms", "\(window)"], at: arguments.count - 1) }
        arguments.insert(contentsOf: ["--busy-poll-us", "\(request.busyPollMicroseconds)"], at: arguments.count - 1)
        arguments.insert(contentsOf: ["--remount-wait", "\(request.remountWaitSeconds)s"], at: arguments.count - 1)
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let daemonEnvironment = vaultByEnvironment ? environment(vault: vaultPath) : []
        defer { daemonEnvironment.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = vaultByEnvironment ? posix_spawn(&pid, "/proc/self/exe", &actions, nil, argv, daemonEnvironment + [nil])
                                    : posix_spawn(&pid, "/proc/self/exe", &actions, nil, argv, environ)
        close(ready.write)
        close(secret.read)
        guard rc == 0 else {
            close(ready.read)
            close(secret.write)
            throw CommandFailure(message: "cannot start the keychainfs daemon: \(String(cString: strerror(rc)))", status: .failure)
        }
        passphrase.withUnsafeBytes { _ = Terminal.writeAll(secret.write, $0) }
        close(secret.write)

        let report = readLine(ready.read)
        close(ready.read)
        if report.hasPrefix("ready ") {
            if !request.quiet { Terminal.printInfo(String(report.dropFirst(6))) }
            return
        }
        if report.hasPrefix("error ") {
            let rest = report.dropFirst(6)
            let status = ExitStatus(reported: rest.prefix { $0 != " " })
            throw CommandFailure(message: String(rest.drop { $0 != " " }.dropFirst()), status: status)
        }
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        throw CommandFailure(message: "the keychainfs daemon exited before mounting (status \(status))", status: .mountFailure)
    }

    /// This process's environment with KEYCHAINFS_VAULT naming `vault`.
    private static func environment(vault: String) -> [UnsafeMutablePointer<CChar>?] {
        let prefix = "KEYCHAINFS_VAULT="
        var entries: [UnsafeMutablePointer<CChar>?] = [strdup(prefix + vault)]
        var entry = environ
        while let variable = entry.pointee {
            if strncmp(variable, prefix, prefix.utf8.count) != 0 { entries.append(strdup(variable)) }
            entry += 1
        }
        return entries
    }

    private static func makePipe() throws(CommandFailure) -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw CommandFailure(message: "cannot create a pipe", status: .failure) }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        return (fds[0], fds[1])
    }

    /// Reads until newline or end of file; the daemon closes its end after one line.
    private static func readLine(_ fd: Int32) -> String {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let n = read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 || byte == 0x0A { break }
            bytes.append(byte)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
