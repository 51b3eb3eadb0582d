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
        guard mkdir(partial, 0o755) == 0, (try? copyExecutable(built, to: partial + "/keychainfs")) != nil,
              chmod(partial, 0o755) == 0, chmod(partial + "/keychainfs", 0o755) == 0,
              rename(partial, directory) == 0 || FileManager.default.isExecutableFile(atPath: copy) else {
            try? FileManager.default.removeItem(atPath: partial)
            return built
        }
        try? FileManager.default.removeItem(atPath: partial)
    }
    return copy
}()

extension RunResult {
    /// The status as a row of keychainfs's table (nil for one it does not have). Qualified:
    /// Swift Testing has an ExitStatus of its own.
    var exitStatus: Support.ExitStatus? { Support.ExitStatus(rawValue: status) }
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
