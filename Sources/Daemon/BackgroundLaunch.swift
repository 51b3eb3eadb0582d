import FoundationEssentials
import Glibc
import Support
import SystemCalls
import SystemPackage
import VaultCore

/// Going to the background without fork(): the Swift runtime may already run threads, so we
/// re-execute ourselves as the daemon (gocryptfs does the same) in a new session, hand it the
/// passphrase through a pipe, and return once it reports that the mount serves requests.
package enum BackgroundLaunch {
    /// The daemon's command line: `keychainfs mount --daemon MOUNTPOINT`, what `ps` shows; the
    /// request itself comes on `requestFD`. Read before the command line is parsed, so no
    /// option of the public command stands for it.
    static let daemonFlag = "--daemon"
    static let readyFD: Int32 = 3, passphraseFD: Int32 = 4, requestFD: Int32 = 5

    /// Whether `arguments` (without the program's name) are the daemon's command line.
    package static func startsDaemon(_ arguments: [String]) -> Bool {
        arguments.count == 3 && arguments[0] == "mount" && arguments[1] == daemonFlag
    }

    /// In the daemon: serves the request the launcher wrote, and never returns.
    package static func serveLaunchedRequest() -> Never {
        let bytes = (try? FileDescriptor(rawValue: requestFD).readToEnd()) ?? []
        close(requestFD)
        guard let request = try? JSONDecoder().decode(MountRequest.self, from: Data(bytes)) else {
            Terminal.printError("keychainfs mount --daemon is started by keychainfs mount, with its request on descriptor \(requestFD)")
            exit(ExitStatus.usage.rawValue)
        }
        MountDaemon.serve(request, passphraseFD: passphraseFD, readyFD: readyFD)
    }

    /// Starts the daemon and returns once it serves the mount. `passphrase` is asked after the
    /// checks that need none (true: the vault is created, so it is asked twice).
    package static func launch(_ request: MountRequest,
                       passphrase: (_ creating: Bool) throws(VaultError) -> SecureBuffer) throws(CommandFailure) {
        let mountpoint = try Mountpoint.check(request.mountpoint)
        let creating = try MountRequest.createsVault(at: request.vault.location)
        let secret: SecureBuffer
        do throws(VaultError) {
            secret = try passphrase(creating)
        } catch {
            throw CommandFailure(error)
        }
        var sent = request
        sent.mountpoint = mountpoint
        // Checked on this side already: one JSON value, no argument to rebuild.
        let encoded: [UInt8]
        do {
            encoded = Array(try JSONEncoder().encode(sent))
        } catch {
            throw CommandFailure(message: "cannot encode the mount request: \(error)", status: .failure)
        }

        let ready = try makePipe(), secretPipe = try makePipe(), requestPipe = try makePipe()
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        Subprocess.nullStandardStreams(&actions)
        posix_spawn_file_actions_adddup2(&actions, ready.write, readyFD)
        posix_spawn_file_actions_adddup2(&actions, secretPipe.read, passphraseFD)
        posix_spawn_file_actions_adddup2(&actions, requestPipe.read, requestFD)

        // A PostgreSQL URI may carry a password, and a process's arguments are anyone's to read
        // (/proc/PID/cmdline) for as long as the mount lasts: the vault is named in the request only.
        let arguments = ["keychainfs", "mount", daemonFlag, mountpoint]
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let environment = daemonEnvironment()
        defer { environment.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, "/proc/self/exe", &actions, nil, argv, environment + [nil])
        close(ready.write)
        close(secretPipe.read)
        close(requestPipe.read)
        guard rc == 0 else {
            close(ready.read)
            close(secretPipe.write)
            close(requestPipe.write)
            throw CommandFailure(message: "cannot start the keychainfs daemon: \(Errno(rawValue: rc))", status: .failure)
        }
        // Far below a pipe's buffer; a daemon that died early makes the write fail (SIGPIPE is
        // ignored in the daemon only, so the launcher ignores it for this write too).
        let previous = signal(SIGPIPE, SIG_IGN)
        encoded.withUnsafeBytes { _ = Terminal.writeAll(requestPipe.write, $0) }
        close(requestPipe.write)
        secret.withUnsafeBytes { _ = Terminal.writeAll(secretPipe.write, $0) }
        close(secretPipe.write)
        signal(SIGPIPE, previous)

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
        let status = (try? SystemCall.waitStatus(of: pid)) ?? 0
        throw CommandFailure(message: "the keychainfs daemon exited before mounting (status \(status))", status: .mountFailure)
    }

    /// The Swift runtime's crash report, which goes to the journal with the daemon's stderr
    /// (`JournalStderr`), without the register dump and the memory it points at (key bytes, as
    /// likely as any) or the list of loaded images: the frames only. The runtime reads this at
    /// start, so the daemon is given it; later keys win over the caller's own.
    static let crashReport = "registers=none,images=none,sanitize=yes,interactive=no"

    /// This process's environment, with `crashReport` added to SWIFT_BACKTRACE.
    private static func daemonEnvironment() -> [UnsafeMutablePointer<CChar>?] {
        let prefix = "SWIFT_BACKTRACE="
        let own = getenv("SWIFT_BACKTRACE").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
        var entries: [UnsafeMutablePointer<CChar>?] = [strdup(prefix + (own.map { $0 + "," } ?? "") + crashReport)]
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
        String(decoding: FileDescriptor(rawValue: fd).readLine(), as: UTF8.self)
    }
}
