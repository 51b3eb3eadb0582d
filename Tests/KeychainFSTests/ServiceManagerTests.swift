@testable import Daemon
import Foundation
import Glibc
import Testing

/// The shipped systemd units, and the daemon under Type=notify as systemd runs it.
@Suite(.tags(.mount)) struct ServiceManagerTests {
    private static let dist = URL(fileURLWithPath: readmePath).deletingLastPathComponent().appendingPathComponent("dist").path

    /// A shipped unit with its programs pointed at this build: what `systemd-analyze verify`
    /// checks exists before scripts/setup installs it.
    private static func unitForThisBuild(_ name: String) throws -> String {
        try String(contentsOfFile: dist + "/" + name, encoding: .utf8)
            .replacingOccurrences(of: "/usr/local/bin/keychainfs", with: keychainfsBinary)
            .replacingOccurrences(of: "/usr/local/libexec/keychainfs-askpass", with: dist + "/keychainfs-askpass")
    }

    /// `systemd-analyze verify --user` on `text` saved as `file`, verifying `unit` (an instance
    /// of a template). Needs a runtime directory of its own for the user manager it simulates.
    private static func verify(_ text: String, file: String, unit: String) throws -> RunResult {
        let directory = NSTemporaryDirectory() + "keychainfs-units-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory + "/runtime", withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try text.write(toFile: directory + "/" + file, atomically: true, encoding: .utf8)
        return try run("/usr/bin/systemd-analyze", ["verify", "--user", "--man=no", directory + "/" + unit],
                       environment: ["XDG_RUNTIME_DIR": directory + "/runtime"])
    }

    @Test(arguments: [("keychainfs@.service", "keychainfs@secrets.service"),
                      ("keychainfs-secret-service.service", "keychainfs-secret-service.service")])
    func theShippedUnitsVerify(file: String, unit: String) throws {
        let result = try Self.verify(try Self.unitForThisBuild(file), file: file, unit: unit)
        #expect(result.status == 0 && result.stderr.isEmpty, "\(result.stderr)")
    }

    /// The check above can fail: systemd-analyze only warns about a directive it cannot parse.
    /// A foreground daemon's stderr is the journal: its crash report must leave out registers
    /// and the memory they point at, as the background daemon's does.
    @Test(arguments: ["keychainfs@.service", "keychainfs-secret-service.service"])
    func theUnitsKeepKeysOutOfCrashReports(_ unit: String) throws {
        let text = try String(contentsOfFile: Self.dist + "/" + unit, encoding: .utf8)
        #expect(text.contains("Environment=SWIFT_BACKTRACE=" + BackgroundLaunch.crashReport + "\n"))
    }

    @Test func verifyingReportsAMistakeInTheUnit() throws {
        let broken = try Self.unitForThisBuild("keychainfs@.service").replacingOccurrences(of: "Type=notify", with: "Type=notfy")
        let result = try Self.verify(broken, file: "keychainfs@.service", unit: "keychainfs@secrets.service")
        #expect(result.stderr.contains("notfy"), "\(result.stderr)")
    }

    /// The unit's own ExecStart, with a credential as LoadCredential= gives it and NOTIFY_SOCKET
    /// as systemd sets it: READY=1 comes once the mount answers, STOPPING=1 after `systemctl
    /// stop`'s SIGTERM, and the daemon exits 0 with nothing left mounted.
    @Test func theUnitsCommandMountsWithTheCredentialAndNotifiesSystemd() throws {
        let f = try CLIFixture()
        #expect(try f.cli(["set", "app/token", "s3cret"]).exitStatus == .success)
        let mountpoint = f.directory + "/mnt", credentials = f.directory + "/credentials"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: f.passphraseFile, toPath: credentials + "/passphrase")
        let listener = try NotifyListener(path: f.directory + "/notify")
        let process = try Self.startUnitCommand(vault: f.vault, mountpoint: mountpoint,
                                                environment: ["NOTIFY_SOCKET": listener.path, "CREDENTIALS_DIRECTORY": credentials])
        defer {
            if process.isRunning { process.terminate() }
            if isMounted(mountpoint) { _ = try? run("/bin/fusermount3", ["-u", "-z", mountpoint]) }
        }

        let ready = listener.receive(within: 30)
        #expect(ready?.split(separator: "\n").contains("READY=1") == true, "\(ready ?? "nothing")")
        #expect(ready?.contains("STATUS=mounted \(f.vault) at \(mountpoint)") == true, "\(ready ?? "nothing")")
        // Ready means served: the first request after it is answered.
        #expect(readFile(mountpoint + "/app/token") == Array("s3cret".utf8))

        process.terminate()  // what systemctl --user stop sends
        let stopping = listener.receive(within: 30)
        #expect(stopping?.split(separator: "\n").contains("STOPPING=1") == true, "\(stopping ?? "nothing")")
        #expect(eventually(within: 30) { !process.isRunning })
        #expect(process.terminationStatus == 0)
        #expect(!isMounted(mountpoint))
        #expect(listener.receive(within: 0.2) == nil)
    }

    /// Without a credential the unit asks through keychainfs-askpass, which takes the first
    /// dialog program it finds: here a stand-in for zenity that answers with the passphrase.
    @Test func withoutACredentialTheUnitAsksThroughTheDialog() throws {
        let f = try CLIFixture()
        let mountpoint = f.directory + "/mnt", programs = f.directory + "/bin"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: programs, withIntermediateDirectories: true)
        try "#!/bin/sh\nexec cat '\(f.passphraseFile)'\n".write(toFile: programs + "/zenity", atomically: true, encoding: .utf8)
        chmod(programs + "/zenity", 0o700)
        let listener = try NotifyListener(path: f.directory + "/notify")
        let process = try Self.startUnitCommand(vault: f.vault, mountpoint: mountpoint,
                                                environment: ["NOTIFY_SOCKET": listener.path,
                                                              "PATH": programs + ":/usr/bin:/bin"])
        defer {
            if process.isRunning { process.terminate() }
            if isMounted(mountpoint) { _ = try? run("/bin/fusermount3", ["-u", "-z", mountpoint]) }
        }
        let ready = listener.receive(within: 30)
        #expect(ready?.split(separator: "\n").contains("READY=1") == true, "\(ready ?? "nothing")")
        #expect(isMounted(mountpoint))
        process.terminate()
        #expect(eventually(within: 30) { !process.isRunning })
        #expect(process.terminationStatus == 0)
    }

    /// The unit's ExecStart command for `mountpoint`, with the default vault set to `vault`.
    private static func startUnitCommand(vault: String, mountpoint: String, environment extra: [String: String]) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", try execStartScript(), "keychainfs", mountpoint]
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "CREDENTIALS_DIRECTORY")
        environment["KEYCHAINFS_VAULT"] = vault
        for (key, value) in extra { environment[key] = value }
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// The credential is the passphrase only when no option says where it is.
    @Test func aPassphraseOptionWinsOverTheCredential() throws {
        let f = try CLIFixture()
        let mountpoint = f.directory + "/mnt", credentials = f.directory + "/credentials"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
        try "not the passphrase\n".write(toFile: credentials + "/passphrase", atomically: true, encoding: .utf8)
        let environment = ["CREDENTIALS_DIRECTORY": credentials]
        let fromCredential = try run(keychainfsBinary, ["mount", "--vault", f.vault, mountpoint], environment: environment)
        #expect(fromCredential.exitStatus == .wrongPassphrase, "\(fromCredential.stderr)")
        #expect(!isMounted(mountpoint))
        let fromOption = try run(keychainfsBinary, ["mount", "--vault", f.vault, "--passphrase-file", f.passphraseFile, mountpoint],
                                 environment: environment)
        #expect(fromOption.exitStatus == .success, "\(fromOption.stderr)")
        #expect(try run(keychainfsBinary, ["unmount", mountpoint]).exitStatus == .success)
    }

    /// The shell command of the unit's ExecStart=, as systemd hands it to /bin/sh ($$ is $).
    private static func execStartScript() throws -> String {
        let unit = try unitForThisBuild("keychainfs@.service")
        guard let line = unit.split(separator: "\n").first(where: { $0.hasPrefix("ExecStart=/bin/sh -c '") }),
              let open = line.firstIndex(of: "'"), let close = line.lastIndex(of: "'"), open < close else {
            throw FixtureError("no ExecStart=/bin/sh -c '...' in keychainfs@.service")
        }
        return String(line[line.index(after: open)..<close]).replacingOccurrences(of: "$$", with: "$")
    }
}

/// The receiving end of sd_notify: a datagram socket at a path, as systemd's NOTIFY_SOCKET.
final class NotifyListener {
    let path: String
    private let fd: Int32

    init(path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw FixtureError("socket: errno \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw FixtureError("socket path too long") }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else { throw FixtureError("bind \(path): errno \(errno)") }
    }

    deinit {
        close(fd)
        unlink(path)
    }

    /// The next datagram, or nil if none comes before the deadline.
    func receive(within seconds: Double) -> String? {
        let deadline = Date().addingTimeInterval(seconds)
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while true {
            let left = deadline.timeIntervalSinceNow
            let ready = poll(&poller, 1, Int32(max(0, left) * 1000))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return nil }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = recv(fd, &buffer, buffer.count, 0)
            if n < 0 && errno == EINTR { continue }
            return n < 0 ? nil : String(decoding: buffer[..<n], as: UTF8.self)
        }
    }
}
