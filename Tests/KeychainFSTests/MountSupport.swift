import Foundation
import Glibc
import Testing

/// A vault mounted for one test, unmounted (and its files removed) when the test ends,
/// whether it passed or not.
final class MountFixture {
    let cli: CLIFixture
    let mountpoint: String

    init(create: Bool = true, passphrase: String = "correct horse battery staple") throws {
        cli = try CLIFixture(create: create, passphrase: passphrase)
        mountpoint = cli.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let mounted = try mount()
        guard mounted.status == 0 else {
            throw FixtureError("mount failed (\(mounted.status)): \(mounted.stderr)")
        }
    }

    deinit {
        unmountQuietly()
    }

    var vault: String { cli.vault }

    func path(_ relative: String) -> String { mountpoint + "/" + relative }

    @discardableResult
    func mount(passphraseFile: String? = nil, extra: [String] = []) throws -> RunResult {
        try run(keychainfsBinary, ["mount", "--vault", cli.vault, "--passphrase-file", passphraseFile ?? cli.passphraseFile,
                                   "--kdf", "interactive"] + extra + [mountpoint])
    }

    @discardableResult
    func unmount() throws -> RunResult {
        try run(keychainfsBinary, ["unmount", mountpoint])
    }

    func unmountQuietly() {
        if isMounted(mountpoint) {
            _ = try? run(keychainfsBinary, ["unmount", mountpoint])
        }
        if isMounted(mountpoint) {
            _ = try? run("/bin/fusermount3", ["-u", "-z", mountpoint])
        }
    }
}

struct FixtureError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

func isMounted(_ mountpoint: String) -> Bool {
    let mounts = procText("/proc/self/mounts")
    return mounts.split(separator: "\n").contains { $0.split(separator: " ").dropFirst().first.map(String.init) == mountpoint }
}

/// The errno of a failing call, or 0 when it succeeded.
func errnoOf(_ body: () -> Int32) -> Int32 {
    errno = 0
    return body() < 0 ? errno : 0
}

func writeFile(_ path: String, _ bytes: [UInt8], flags: Int32 = O_WRONLY | O_CREAT | O_TRUNC) -> Int32 {
    let fd = open(path, flags, 0o644)
    guard fd >= 0 else { return errno }
    var failure: Int32 = 0
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
        if n < 0 {
            failure = errno
            break
        }
        offset += n
    }
    if close(fd) != 0 && failure == 0 { failure = errno }
    return failure
}

func readFile(_ path: String) -> [UInt8]? {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var result: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = Glibc.read(fd, &chunk, chunk.count)
        if n < 0 { return nil }
        if n == 0 { return result }
        result += chunk[..<n]
    }
}

func listing(_ path: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
}

func sh(_ script: String, environment: [String: String] = [:]) throws -> RunResult {
    try run("/bin/sh", ["-c", script], environment: environment)
}

/// A /proc file's text, read to the end with read(2): Foundation trusts the reported size (0)
/// and can return only part of it.
func procText(_ path: String) -> String {
    readFile(path).map { String(decoding: $0, as: UTF8.self) } ?? ""
}
