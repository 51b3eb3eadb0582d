import Foundation
import Glibc
@testable import Support
import Testing

/// Where the build put `keychainfs` (and generate-manual) beside this test bundle, or the
/// directory of $KEYCHAINFS_BIN.
let keychainfsBuildDirectory: String = {
    if let explicit = ProcessInfo.processInfo.environment["KEYCHAINFS_BIN"] {
        return (explicit as NSString).deletingLastPathComponent
    }
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
    while !dir.path.hasSuffix(".build/debug") && !dir.path.hasSuffix(".build/release") && dir.path != "/" {
        if FileManager.default.isExecutableFile(atPath: dir.appendingPathComponent("keychainfs").path) { break }
        dir = dir.deletingLastPathComponent()
    }
    return dir.path
}()

/// The `keychainfs` the tests run: a copy of the built one (or of $KEYCHAINFS_BIN) in a
/// directory of root's under /tmp, made once per binary. Tests run it as other users too
/// (nobody, keychainfs-test), who may not be able to reach the repository (a clone under
/// /root), and rules admit it, which refuse a binary below a directory anyone else may change.
let keychainfsBinary: String = {
    let built = ProcessInfo.processInfo.environment["KEYCHAINFS_BIN"] ?? keychainfsBuildDirectory + "/keychainfs"
    var info = stat()
    guard stat(built, &info) == 0 else { return built }
    let directory = "/tmp/keychainfs-test-binary-\(info.st_ino)-\(info.st_mtim.tv_sec)-\(info.st_mtim.tv_nsec)"
    let copy = directory + "/keychainfs"
    if !FileManager.default.isExecutableFile(atPath: copy) {
        // Built aside and renamed into place, so a half-copied binary is never run.
        let partial = directory + ".partial-\(getpid())"
        try? FileManager.default.removeItem(atPath: partial)
        guard mkdir(partial, 0o755) == 0, (try? FileManager.default.copyItem(atPath: built, toPath: partial + "/keychainfs")) != nil,
              chmod(partial, 0o755) == 0, chmod(partial + "/keychainfs", 0o755) == 0,
              rename(partial, directory) == 0 || FileManager.default.isExecutableFile(atPath: copy) else {
            try? FileManager.default.removeItem(atPath: partial)
            return built
        }
        try? FileManager.default.removeItem(atPath: partial)
    }
    return copy
}()

/// A child that exits before reading its input must not kill the test runner with SIGPIPE.
let ignoreBrokenPipes: Void = { signal(SIGPIPE, SIG_IGN) }()

struct RunResult {
    let status: Int32
    let stdout: Data
    let stderr: String
    var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
    /// The status as a row of keychainfs's table (nil for one it does not have). Qualified:
    /// Swift Testing has an ExitStatus of its own.
    var exitStatus: Support.ExitStatus? { Support.ExitStatus(rawValue: status) }
}

/// Runs a command to completion, feeding `stdin`, and collects its output.
@discardableResult
func run(_ executable: String, _ arguments: [String], stdin: Data? = nil, environment: [String: String] = [:],
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

/// A scratch directory holding a vault and a passphrase file, with the CLI bound to them.
final class CLIFixture {
    let directory: String
    let vault: String
    let passphraseFile: String

    /// `vault`: where the vault is instead of a file in the scratch directory (a PostgreSQL URI).
    init(create: Bool = true, kdf: String = "interactive", passphrase: String = "correct horse battery staple",
         vault: String? = nil) throws {
        directory = NSTemporaryDirectory() + "keychainfs-cli-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        self.vault = vault ?? directory + "/vaults/test.vault"
        passphraseFile = directory + "/pw"
        try (passphrase + "\n").write(toFile: passphraseFile, atomically: true, encoding: .utf8)
        if create {
            let result = try cli(["init", "--kdf", kdf])
            precondition(result.exitStatus == .success, "init failed: \(result.stderr)")
        }
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    /// Runs `keychainfs SUBCOMMAND --vault V --passphrase-file P ARGS...`.
    @discardableResult
    func cli(_ arguments: [String], stdin: Data? = nil, passphraseFile: String? = nil) throws -> RunResult {
        var args = arguments
        args.insert(contentsOf: ["--vault", vault, "--passphrase-file", passphraseFile ?? self.passphraseFile], at: 1)
        return try run(keychainfsBinary, args, stdin: stdin)
    }

    func write(_ text: String, to name: String) throws -> String {
        let path = directory + "/" + name
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}
