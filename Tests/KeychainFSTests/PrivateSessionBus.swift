import Foundation
import Glibc
@testable import Support

/// A dbus-daemon of a test's own, with a configuration that owns nothing else: no service
/// activation (so no gnome-keyring starts behind a test's back) but from `serviceDirectory`
/// when given, every name ownable, every message allowed. Stopped (killed and reaped) by `stop()` or when it goes.
final class PrivateSessionBus {
    let address: String
    let pid: pid_t
    private let directory: String
    private var running = true

    /// For a child process (python, busctl) that should use this bus as its session bus.
    var environment: [String: String] { ["DBUS_SESSION_BUS_ADDRESS": address] }

    /// `user`: the account the daemon runs as once it listens (its `<user>`), so that user's
    /// own programs, and only theirs, may connect.
    init(serviceDirectory: String? = nil, user: String? = nil) throws {
        directory = NSTemporaryDirectory() + "keychainfs-bus-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let configuration = directory + "/bus.conf"
        try """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:path=\(directory)/socket</listen>
              <auth>EXTERNAL</auth>
            \(user.map { "  <user>\($0)</user>" } ?? "")
            \(serviceDirectory.map { "  <servicedir>\($0)</servicedir>" } ?? "")
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
              </policy>
            </busconfig>
            """.write(toFile: configuration, atomically: true, encoding: .utf8)
        (pid, address) = try PrivateSessionBus.spawn(configuration: configuration)
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Kills the daemon and waits for it; every connection to it then ends.
    func stop() {
        guard running else { return }
        running = false
        kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }

    /// Starts dbus-daemon with only standard streams (on /dev/null) and the pipe it prints its
    /// address to (descriptor 3): the test runner's other descriptors (mounts, other tests'
    /// pipes) must not live on in it.
    private static func spawn(configuration: String) throws -> (pid_t, String) {
        var ends: [Int32] = [0, 0]
        // Close-on-exec from the start: a process another test spawns meanwhile must not
        // hold the write end (the read would then never see the daemon's end).
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            throw FixtureError("socketpair: \(String(cString: strerror(errno)))")
        }
        defer { close(ends[0]) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, ends[1], 3)
        Subprocess.closeDescriptors(from: 4, &actions)
        // Swift Testing runs tests on dispatch threads, which block every signal; the daemon
        // would inherit that mask and outlive a SIGTERM.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        Subprocess.defaultSignals(&attributes)
        let arguments: [String] = ["/usr/bin/dbus-daemon", "--config-file=" + configuration, "--nofork", "--print-address=3"]
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, "/usr/bin/dbus-daemon", &actions, &attributes, argv, environ)
        close(ends[1])
        guard rc == 0 else { throw FixtureError("cannot start dbus-daemon: \(String(cString: strerror(rc)))") }
        guard let address = readLine(ends[0], deadline: .now + .seconds(20)), !address.isEmpty else {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            throw FixtureError("dbus-daemon printed no address")
        }
        return (pid, address)
    }

    /// One line from `fd`, waiting for it until `deadline`; nil at end of file or timeout.
    static func readLine(_ fd: Int32, deadline: ContinuousClock.Instant) -> String? {
        var line: [UInt8] = []
        while true {
            let remaining = deadline - .now
            guard remaining > .zero else { return nil }
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(clamping: remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000 + 1)
            let ready = poll(&descriptor, 1, milliseconds)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return nil }
            var byte: UInt8 = 0
            let n = read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            guard n == 1 else { return nil }
            if byte == 0x0A { return String(decoding: line, as: UTF8.self) }
            line.append(byte)
        }
    }
}
