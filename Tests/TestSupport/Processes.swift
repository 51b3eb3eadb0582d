import Foundation
import Glibc

/// A child that exits before reading its input must not kill the test runner with SIGPIPE.
package let ignoreBrokenPipes: Void = { signal(SIGPIPE, SIG_IGN) }()

package struct RunResult {
    package let status: Int32
    package let stdout: Data
    package let stderr: String

    package init(status: Int32, stdout: Data, stderr: String) {
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
    }

    package var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
}

/// Runs a command to completion, feeding `stdin`, and collects its output.
@discardableResult
package func run(_ executable: String, _ arguments: [String], stdin: Data? = nil, environment: [String: String] = [:],
         directory: String? = nil) throws -> RunResult {
    ignoreBrokenPipes
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    var env = ProcessInfo.processInfo.environment
    env.removeValue(forKey: "KEYCHAINFS_VAULT")
    for (key, value) in environment { env[key] = value }
    process.environment = env
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    // Output goes to files, so a chatty child never blocks on a full pipe.
    let outPath = NSTemporaryDirectory() + "kfs-out-" + UUID().uuidString
    let errPath = outPath + ".err"
    FileManager.default.createFile(atPath: outPath, contents: nil)
    FileManager.default.createFile(atPath: errPath, contents: nil)
    defer {
        try? FileManager.default.removeItem(atPath: outPath)
        try? FileManager.default.removeItem(atPath: errPath)
    }
    let out = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
    let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
    let input = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = stdin == nil ? FileHandle.nullDevice : input
    try process.run()
    try out.close()
    try err.close()
    if let stdin {
        let writer = input.fileHandleForWriting
        DispatchQueue.global().async {
            try? writer.write(contentsOf: stdin)  // the child may exit without reading it all
            try? writer.close()
        }
    }
    process.waitUntilExit()
    let outData = try Data(contentsOf: URL(fileURLWithPath: outPath))
    let errData = try Data(contentsOf: URL(fileURLWithPath: errPath))
    return RunResult(status: process.terminationStatus, stdout: outData, stderr: String(decoding: errData, as: UTF8.self))
}

/// Polls `condition` until it holds or `seconds` pass; whether it held.
package func eventually(within seconds: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        usleep(20_000)
    }
    return try condition()
}

/// A fixture could not be set up: the test fails with the reason, never passes without it.
package struct FixtureError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
