import Foundation
import Glibc
@testable import Support

/// A TPM 2.0 of its own for a test: swtpm with a fresh state in a temporary directory, serving
/// on a free 127.0.0.1 port, its control channel on the next (tpm2-tss's swtpm TCTI speaks TCP
/// only, and finds the control channel there). Started with posix_spawn in the foreground (a daemonized swtpm is
/// reparented where nobody reaps it), its only descriptors the standard three, with default
/// signals (it inherits no blocked SIGTERM); stopped and reaped by its pid. A fresh state is a
/// fresh chip: another owner seed, another storage root key, another machine.
final class SoftwareTPM {
    let directory: String
    let port: Int
    private let pid: pid_t
    private var running = true

    /// What `KEYCHAINFS_TCTI` says to reach it.
    var tcti: String { "swtpm:host=127.0.0.1,port=\(port)" }

    init() throws {
        directory = "/tmp/kcfs-tpm-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory + "/state", withIntermediateDirectories: true)
        port = try freeLocalPortPair()
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        Subprocess.nullStandardStreams(&actions)
        Subprocess.closeDescriptors(from: 3, &actions)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        Subprocess.defaultSignals(&attributes)
        let executable = "/usr/bin/swtpm"
        let arguments = [
            executable, "socket", "--tpm2", "--tpmstate", "dir=\(directory)/state",
            "--server", "type=tcp,port=\(port),bindaddr=127.0.0.1", "--ctrl", "type=tcp,port=\(port + 1),bindaddr=127.0.0.1",
            "--flags", "not-need-init,startup-clear", "--log", "file=\(directory)/log",
        ]
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, executable, &actions, &attributes, argv, environ)
        guard rc == 0 else { throw FixtureError("cannot start swtpm (install swtpm): \(String(cString: strerror(rc)))") }
        pid = child
        guard eventually(within: 10, { acceptsConnections(port: port) }) else {
            stop()
            throw FixtureError("swtpm does not listen on \(port): \((try? String(contentsOfFile: directory + "/log", encoding: .utf8)) ?? "")")
        }
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func stop() {
        guard running else { return }
        running = false
        kill(pid, SIGTERM)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }
}
