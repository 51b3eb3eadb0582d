import Foundation
import Glibc
import VaultCore

/// A real process for identity and matching tests: it blocks on a standard input nobody
/// writes to, until the test ends it (at the latest when this goes away).
final class ChildProcess {
    let process = Process()
    private let input = Pipe()

    init(_ executable: String, _ arguments: [String] = []) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Running means the kernel records the new executable; until exec, the child is a copy of us.
        let expected = FileIdentity.of(path: executable)
        precondition(pollUntil { ProcessIdentity(pid: pid).executable?.file == expected }, "\(executable) did not start")
    }

    var pid: pid_t { process.processIdentifier }

    func end() {
        guard process.isRunning else { return }
        kill(pid, SIGKILL)
        process.waitUntilExit()
    }

    deinit { end() }
}

/// Polls `condition` until it holds or `seconds` pass; whether it held.
func pollUntil(within seconds: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        usleep(10_000)
    }
    return try condition()
}

/// A copy of `source` at `path`: a new file (new inode) with the same bytes, executable.
func copyExecutable(_ source: String, to path: String) throws {
    let bytes = try Data(contentsOf: URL(fileURLWithPath: source))
    try bytes.write(to: URL(fileURLWithPath: path))
    precondition(chmod(path, 0o755) == 0)
}
