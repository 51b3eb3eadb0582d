import Foundation
import Glibc
@testable import KeychainFS
import Testing

/// The README's own lines, typed at a terminal (tmux) by a person with a fresh home directory.
@Suite(.tags(.mount)) struct ReadmeTests {
    @Test func theUsedByLinesWorkAsWritten() throws {
        let home = NSTemporaryDirectory() + "keychainfs-home-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: home + "/secrets", withIntermediateDirectories: true)
        let session = "readme"
        let socket = home + "/tmux.socket"
        let shell = "env -u XDG_DATA_HOME -u KEYCHAINFS_VAULT -u XDG_RUNTIME_DIR HOME=\(home) PATH=\(URL(fileURLWithPath: keychainfsBinary).deletingLastPathComponent().path):/usr/bin:/bin bash --norc --noprofile"
        // A server of its own, started with no descriptor but 0-2 and no blocked signal:
        // Foundation's Process learns that a child exited when a socket the child inherits
        // closes, so a tmux server that inherited it would keep `run` waiting for as long as the
        // server lives; and a server that inherited the runner thread's blocked SIGTERM would
        // outlive its own kill-server.
        func tmux(_ arguments: [String]) throws -> RunResult {
            let exec = "import os, signal, sys; os.closerange(3, 1 << 16); signal.pthread_sigmask(signal.SIG_SETMASK, []); os.execv(sys.argv[1], sys.argv[1:])"
            return try run("/usr/bin/python3", ["-c", exec, "/usr/bin/tmux", "-S", socket] + arguments)
        }
        defer {
            _ = try? tmux(["kill-server"])
            if isMounted(home + "/secrets") { _ = try? run("/bin/fusermount3", ["-u", "-z", home + "/secrets"]) }
            try? FileManager.default.removeItem(atPath: home)
        }
        func type(_ keys: String) throws {
            _ = try tmux(["send-keys", "-t", session, "-l", keys])
            _ = try tmux(["send-keys", "-t", session, "Enter"])
        }
        func screen() -> String { (try? tmux(["capture-pane", "-p", "-t", session]).stdoutText) ?? "" }
        func waitFor(_ text: String) throws -> Bool {
            for _ in 0..<300 {
                if screen().contains(text) { return true }
                usleep(20_000)
            }
            return false
        }
        #expect(try tmux(["new-session", "-d", "-s", session, "-x", "120", "-y", "30", shell]).status == 0)
        try type("keychainfs ~/secrets")
        #expect(try waitFor("New passphrase"))
        try type("a long passphrase typed by hand")
        #expect(try waitFor("Repeat the passphrase"))
        try type("a long passphrase typed by hand")
        #expect(try waitFor("mounted"), "\(screen())")
        #expect(!screen().contains("a long passphrase"), "the passphrase was echoed")
        try type("mkdir ~/secrets/app && echo s3cret > ~/secrets/app/token && cat ~/secrets/app/token && echo x > ~/secrets/app/pw && echo done-$?")
        #expect(try waitFor("done-0"), "\(screen())")
        #expect(screen().contains("s3cret"))
        try type("keychainfs unmount ~/secrets && echo unmounted-$?")
        #expect(try waitFor("unmounted-0"), "\(screen())")
        #expect(!isMounted(home + "/secrets"))
        #expect(FileManager.default.fileExists(atPath: home + "/.local/share/keychainfs/default.vault"))
    }

    /// The README's table of exit statuses, row for row, is the one the code has.
    @Test func theReadmesExitStatusTableIsTheCodes() throws {
        let readme = try String(contentsOfFile: readmePath, encoding: .utf8)
        let sections = readme.components(separatedBy: "### Errors and exit statuses")
        try #require(sections.count == 2, "the README has no section on exit statuses")
        let rows = sections[1].split(separator: "\n").drop { !$0.hasPrefix("| status") }.dropFirst(2)
            .prefix { $0.hasPrefix("|") }
            .map { $0.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) } }
            .map { "\($0[0]) \($0[1])" }
        #expect(rows == KeychainFS.ExitStatus.allCases.map { "\($0.rawValue) \($0.meaning)" })
    }
}

/// The README at the top of the package this test file belongs to.
let readmePath = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("README.md").path
