@testable import Daemon
import Foundation
import Glibc
@testable import Support
import Synchronization
import Testing
import VaultCore

/// The status a control request is refused with, through the client the commands use.
func refusal(of request: String, at mountpoint: String) -> Support.ExitStatus? {
    do {
        _ = try ControlSocket.request(mountpoint, request)
        return nil
    } catch {
        return error.status
    }
}

/// What the daemon cannot tell a caller it says in its log: on stderr with `-f`, and to syslog.
@Suite(.tags(.mount, .slow)) struct DaemonLogTests {
    @Test func aForegroundDaemonSaysOnStderrWhatNoCallerHears() throws {
        let f = try CLIFixture()
        let mountpoint = f.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let logFile = f.directory + "/daemon.stderr"
        let daemon = try ForegroundDaemon(f, mountpoint: mountpoint, extra: ["--idle-lock", "2s"], standardError: logFile)
        func log() -> String { procText(logFile) }
        func said(_ text: String) -> Bool { log().contains("\(mountpoint): \(text)") }

        #expect(eventually { said("mounted vault \(f.vault); idle lock after 2 s") }, "\(log())")
        let dictionary = "DICT-" + UUID().uuidString, item = "ITEM-" + UUID().uuidString
        let secret = "SECRET-" + UUID().uuidString
        #expect(mkdir(mountpoint + "/" + dictionary, 0o700) == 0)
        #expect(writeFile(mountpoint + "/\(dictionary)/\(item)", Array(secret.utf8)) == 0)

        #expect(eventually { said("locked after 2 s without access") }, "\(log())")
        #expect(try run(keychainfsBinary, ["unlock", "--passphrase-file", f.passphraseFile, mountpoint]).exitStatus == .success)
        kill(daemon.process.processIdentifier, SIGUSR1)
        #expect(eventually { said("locked on SIGUSR1") }, "\(log())")

        #expect(refusal(of: "frobnicate", at: mountpoint) == .usage)
        #expect(refusal(of: "unlock lots", at: mountpoint) == .usage)
        // Another user who can reach the socket (a capability to pass the 0700 directory) is
        // refused by the daemon itself, which sees its uid.
        let runtimeParent = URL(fileURLWithPath: RuntimeState.directory).deletingLastPathComponent().path
        let other = try run("/usr/bin/setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups",
                                                 "--inh-caps=+dac_override", "--ambient-caps=+dac_override",
                                                 keychainfsBinary, "lock", mountpoint],
                            environment: ["XDG_RUNTIME_DIR": runtimeParent])
        #expect(other.exitStatus == .failure && other.stderr.contains("not the mounting user"), "\(other.stderr)")
        #expect(eventually { said("refused a control request: unknown request") }, "\(log())")
        #expect(eventually { said("refused a control request: malformed unlock request") }, "\(log())")
        #expect(eventually { said("refused a control request from uid 65534") }, "\(log())")

        #expect(try run(keychainfsBinary, ["unmount", mountpoint]).exitStatus == .success)
        #expect(daemon.exitStatus() == 0)
        #expect(said("unmounted; keys and plaintext wiped"), "\(log())")

        let text = log()
        for leak in [dictionary, item, secret, "correct horse battery staple", "frobnicate", "lots"] {
            #expect(!text.contains(leak), "the daemon's log holds \(leak): \(text)")
        }
        let lines = text.split(separator: "\n").filter { $0.hasPrefix("keychainfs[") }
        #expect(lines.count >= 7)  // the seven lines above; the idle timer may have locked again
        #expect(lines.allSatisfy { $0.hasPrefix("keychainfs[\(daemon.process.processIdentifier)]: \(mountpoint): ") }, "\(text)")
    }

    @Test func whatADeadDaemonLeftIsClearedAndSaid() throws {
        let f = try CLIFixture()
        let mountpoint = f.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let dead = try ForegroundDaemon(f, mountpoint: mountpoint)
        // Kept until the end: its deinit would clear the dead mount itself.
        defer { withExtendedLifetime(dead) {} }
        let deadPID = dead.process.processIdentifier
        kill(deadPID, SIGKILL)
        #expect(dead.exitStatus() != nil)
        var st = stat()
        #expect(errnoOf { stat(mountpoint, &st) } == ENOTCONN)

        let logFile = f.directory + "/daemon.stderr"
        let daemon = try ForegroundDaemon(f, mountpoint: mountpoint, standardError: logFile)
        func said(_ text: String) -> Bool { procText(logFile).contains("\(mountpoint): \(text)") }
        #expect(eventually { said("mounted vault") }, "\(procText(logFile))")
        #expect(said("cleared a dead mount left by a daemon that died"), "\(procText(logFile))")
        #expect(said("replaced the runtime record and control socket left by daemon \(deadPID), which died"), "\(procText(logFile))")
        #expect(try run(keychainfsBinary, ["unmount", mountpoint]).exitStatus == .success)
        #expect(daemon.exitStatus() == 0)
    }

    /// Real syslog datagrams, read where glibc sends them. Only on a machine without a system
    /// logger: /dev/log is then ours for the test, and removed after it.
    @Test(.enabled(if: !FileManager.default.fileExists(atPath: "/dev/log"),
                   "/dev/log exists: a system logger owns it, so syslog is not read here (stderr is, above)"))
    func aBackgroundDaemonLogsToSyslog() throws {
        let syslog = try SyslogListener(at: "/dev/log")
        defer { syslog.stop() }
        let m = try MountFixture()
        let pid = try status(m.mountpoint).pid
        kill(pid, SIGUSR1)
        #expect(refusal(of: "frobnicate", at: m.mountpoint) == .usage)
        #expect(try m.unmount().exitStatus == .success)

        // <facility daemon (3) * 8 + severity> timestamp keychainfs[PID]: MOUNTPOINT: text
        func datagram(_ severity: Int32, _ text: String) -> Bool {
            syslog.datagrams().contains {
                $0.hasPrefix("<\(LOG_DAEMON | severity)>") && $0.contains("keychainfs[\(pid)]: \(m.mountpoint): \(text)")
            }
        }
        #expect(eventually { datagram(LOG_INFO, "mounted vault \(m.vault)") }, "\(syslog.datagrams())")
        #expect(eventually { datagram(LOG_NOTICE, "locked on SIGUSR1") }, "\(syslog.datagrams())")
        #expect(eventually { datagram(LOG_WARNING, "refused a control request: unknown request") }, "\(syslog.datagrams())")
        #expect(eventually { datagram(LOG_INFO, "unmounted; keys and plaintext wiped") }, "\(syslog.datagrams())")
        #expect(!syslog.datagrams().contains { $0.contains("frobnicate") })
    }

    /// The texts themselves: a store failing at unmount gives its errno and never the name its
    /// error carries, and a mountpoint cannot break a line in two.
    @Test func logTextsCarryNoNameFromTheVault() {
        let name = "DICT-\(UUID().uuidString)/ITEM-\(UUID().uuidString)"
        let errors: [VaultError] = [.notFound(name), .integrityFailure(name), .alreadyExists(name), .notEmpty(name),
                                    .isADictionary(name), .invalidName(name), .invalidMove(name), .storageFailure("write of \(name)"),
                                    .invalidArgument(name), .diskFull, .itemTooLarge(size: 2, limit: 1), .locked]
        for error in errors {
            let line = DaemonLog.line(.storeFailedAtUnmount(error), mountpoint: "/m")
            #expect(!line.contains("DICT-") && !line.contains("ITEM-"), "\(line)")
            #expect(line.contains("(errno \(error.errno))"), "\(line)")
        }
        #expect(!DaemonLog.line(.stopped, mountpoint: "/m\nkeychainfs[1]: forged").contains("\n"))
    }
}

/// A Unix datagram socket bound where syslog(3) sends, read on a thread of its own so that
/// senders (every daemon of every test running meanwhile) never wait on a full queue.
final class SyslogListener: Sendable {
    private let fd: Int32
    private let path: String
    private let received = Mutex<[String]>([])
    private let stopping = Atomic<Bool>(false)
    private let reading = Atomic<Bool>(true)

    init(at path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw FixtureError("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw FixtureError("cannot bind \(path): \(reason)")
        }
        chmod(path, 0o666)
        // The reader checks for stop at least this often.
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        Thread.detachNewThread { [self] in
            var buffer = [UInt8](repeating: 0, count: 8192)
            while !stopping.load(ordering: .sequentiallyConsistent) {
                let n = recv(fd, &buffer, buffer.count, 0)
                if n > 0 {
                    let datagram = String(decoding: buffer[..<n], as: UTF8.self)
                    received.withLock { $0.append(datagram) }
                }
            }
            reading.store(false, ordering: .sequentiallyConsistent)
        }
    }

    func datagrams() -> [String] { received.withLock { $0 } }

    /// Stops reading, then closes and removes the socket: glibc's syslog goes back to finding
    /// no logger.
    func stop() {
        stopping.store(true, ordering: .sequentiallyConsistent)
        _ = eventually(within: 5) { !reading.load(ordering: .sequentiallyConsistent) }
        close(fd)
        unlink(path)
    }
}
