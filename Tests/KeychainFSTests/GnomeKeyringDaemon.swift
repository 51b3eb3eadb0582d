import Foundation
import Glibc
@testable import Support

/// A real gnome-keyring-daemon (secrets component only) on a test's private bus, with a home,
/// data and runtime directories of its own and its login keyring unlocked with `password`
/// (given on its standard input, as pam_gnome_keyring does). Started with posix_spawn, its only
/// descriptors the standard three; stopped by its pid.
final class GnomeKeyringDaemon {
    let home: String
    let pid: pid_t
    private var running = true

    /// `keyrings`: files put in its keyrings directory before it starts (name → contents).
    init(bus: PrivateSessionBus, directory: String, password: String = "login password",
         keyrings: [String: String] = [:]) throws {
        home = directory + "/gnome-home"
        let keyringDirectory = home + "/.local/share/keyrings"
        try FileManager.default.createDirectory(atPath: keyringDirectory, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: directory + "/gnome-runtime", withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        for (name, contents) in keyrings {
            try contents.write(toFile: keyringDirectory + "/" + name, atomically: true, encoding: .utf8)
        }
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = home
        environment["XDG_DATA_HOME"] = home + "/.local/share"
        environment["XDG_CONFIG_HOME"] = home + "/.config"
        environment["XDG_RUNTIME_DIR"] = directory + "/gnome-runtime"
        environment["DBUS_SESSION_BUS_ADDRESS"] = bus.address
        environment.removeValue(forKey: "DISPLAY")
        environment.removeValue(forKey: "WAYLAND_DISPLAY")

        var input: [Int32] = [0, 0]
        // A socket pair, close-on-exec from the start (Glibc here has no pipe2).
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &input) == 0 else {
            throw FixtureError("socketpair: \(String(cString: strerror(errno)))")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, input[0], 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        Subprocess.closeDescriptors(from: 3, &actions)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        Subprocess.defaultSignals(&attributes)
        let executable = "/usr/bin/gnome-keyring-daemon"
        let arguments: [String] = [executable, "--foreground", "--components=secrets", "--unlock"]
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0.key + "=" + $0.value) } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var child: pid_t = 0
        // Only 0, 1 and 2 reach the daemon: other tests' pipes and mounts must not live on in it.
        let rc = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
        close(input[0])
        guard rc == 0 else {
            close(input[1])
            throw FixtureError("cannot start gnome-keyring-daemon: \(String(cString: strerror(rc)))")
        }
        pid = child
        Terminal.writeAll(input[1], password)
        close(input[1])
        // Its name on the bus is the sign it serves: `secret-service --status` says another process owns it.
        let owned = eventually(within: 20) {
            (try? run(keychainfsBinary, ["secret-service", "--status"], environment: bus.environment))?.exitStatus == .serviceUnavailable
        }
        guard owned else {
            stop()
            throw FixtureError("gnome-keyring-daemon did not take org.freedesktop.secrets")
        }
    }

    deinit { stop() }

    func stop() {
        guard running else { return }
        running = false
        kill(pid, SIGTERM)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }
}
