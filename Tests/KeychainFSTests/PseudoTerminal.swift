import Foundation
import Glibc

/// A command run at a terminal of its own (a tmux server per instance, as `ReadmeTests` types
/// the README's lines), so that what it asks on /dev/tty is asked there: the test waits for a
/// prompt to appear on the screen and types the answer. The command's exit status is printed
/// after it, where `finish` reads it.
final class PseudoTerminal {
    private let directory: String
    private let socket: String
    private let session = "pin"
    /// What follows the command's last output on the screen, then its exit status.
    static let statusMark = "exit-status-"

    init(_ executable: String, _ arguments: [String], environment: [String: String]) throws {
        directory = NSTemporaryDirectory() + "keychainfs-tty-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        socket = directory + "/tmux.socket"
        let quoted = { (word: String) in "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let variables = environment.map { quoted("\($0.key)=\($0.value)") }.joined(separator: " ")
        let command = "env -u KEYCHAINFS_VAULT \(variables) " + ([executable] + arguments).map(quoted).joined(separator: " ")
            + "; echo \(PseudoTerminal.statusMark)$?; sleep 600"
        guard try tmux(["new-session", "-d", "-s", session, "-x", "200", "-y", "50", "/bin/sh", "-c", command]).status == 0 else {
            throw FixtureError("tmux cannot start a session")
        }
    }

    deinit {
        _ = try? tmux(["kill-server"])
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A server started with no descriptor but 0-2 and no blocked signal (see `ReadmeTests`).
    @discardableResult
    private func tmux(_ arguments: [String]) throws -> RunResult {
        let exec = "import os, signal, sys; os.closerange(3, 1 << 16); signal.pthread_sigmask(signal.SIG_SETMASK, []); os.execv(sys.argv[1], sys.argv[1:])"
        return try run("/usr/bin/python3", ["-c", exec, "/usr/bin/tmux", "-S", socket] + arguments)
    }

    /// What the terminal shows now, its lines joined.
    var screen: String { (try? tmux(["capture-pane", "-p", "-J", "-t", session]).stdoutText) ?? "" }

    /// Whether `text` appears on the screen within `seconds`.
    func waitFor(_ text: String, within seconds: Double = 30) -> Bool {
        eventually(within: seconds) { screen.contains(text) }
    }

    /// Types `line` and Enter, as at the keyboard.
    func type(_ line: String) {
        _ = try? tmux(["send-keys", "-t", session, "-l", line])
        _ = try? tmux(["send-keys", "-t", session, "Enter"])
    }

    /// The command's exit status once it has ended (nil if it did not within 60 s), and the screen without the status line.
    func finish() -> Int32? {
        guard waitFor(PseudoTerminal.statusMark, within: 60) else { return nil }
        let shown = screen
        guard let mark = shown.range(of: PseudoTerminal.statusMark) else { return nil }
        return Int32(shown[mark.upperBound...].prefix { $0.isNumber })
    }
}
