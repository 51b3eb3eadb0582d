import Foundation
import Glibc
import Testing

/// A vault mounted for one test, unmounted (and its files removed) when the test ends,
/// whether it passed or not.
final class MountFixture {
    let cli: CLIFixture
    let mountpoint: String

    /// `extra`: more options of `keychainfs mount` (`--transport io-uring`).
    init(create: Bool = true, passphrase: String = "correct horse battery staple", vault: String? = nil, extra: [String] = []) throws {
        cli = try CLIFixture(create: create, passphrase: passphrase, vault: vault)
        mountpoint = cli.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let mounted = try mount(extra: extra)
        guard mounted.exitStatus == .success else {
            throw FixtureError("mount failed (\(mounted.status)): \(mounted.stderr)")
        }
    }

    deinit {
        unmountQuietly()
    }

    var vault: String { cli.vault }

    func path(_ relative: String) -> String { mountpoint + "/" + relative }

    @discardableResult
    func mount(passphraseFile: String? = nil, extra: [String] = [], environment: [String: String] = [:]) throws -> RunResult {
        try run(keychainfsBinary, ["mount", "--vault", cli.vault, "--passphrase-file", passphraseFile ?? cli.passphraseFile,
                                   "--kdf", "interactive"] + extra + [mountpoint], environment: environment)
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



func isMounted(_ mountpoint: String) -> Bool {
    let mounts = procText("/proc/self/mounts")
    return mounts.split(separator: "\n").contains { $0.split(separator: " ").dropFirst().first.map(String.init) == mountpoint }
}

/// The source /proc/self/mounts gives the mount at `mountpoint`, as the kernel escapes it.
func mountSource(_ mountpoint: String) -> String? {
    procText("/proc/self/mounts").split(separator: "\n").map { $0.split(separator: " ") }
        .first { $0.count > 1 && String($0[1]) == mountpoint }.map { String($0[0]) }
}

/// Fills `directory` (a path in the mount, "" for the mountpoint) with 600 items whose names are
/// a 150-byte prefix and a number: more than one getdents buffer (32 KiB in glibc) holds, so a
/// listing of it is read in parts. Returns the prefix.
@discardableResult
func fillWithLongNames(_ m: MountFixture, in directory: String, content: [UInt8] = [1]) -> String {
    let prefix = String(repeating: "n", count: 150)
    let base = directory.isEmpty ? "" : directory + "/"
    for i in 0..<600 { #expect(writeFile(m.path(base + prefix + "\(i)"), content) == 0) }
    return prefix
}

/// The errno of a failing call, or 0 when it succeeded.
func errnoOf(_ body: () -> Int32) -> Int32 {
    errno = 0
    return body() < 0 ? errno : 0
}

func writeFile(_ path: String, _ bytes: [UInt8], flags: Int32 = O_WRONLY | O_CREAT | O_TRUNC) -> Int32 {
    // Close-on-exec: a process another test spawns meanwhile must not keep the mount busy.
    let fd = open(path, flags | O_CLOEXEC, 0o644)
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
    let fd = open(path, O_RDONLY | O_CLOEXEC)
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

/// A descriptor held by a separate, never-forking process (python), driven line by line.
/// Tests that check what is stored *before* a close need it: any fork in the test runner
/// (other tests spawn processes) copies the runner's descriptors, and closing a copy is a flush.
final class HeldDescriptor {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()

    static let script = """
        import mmap, os, sys
        flags = 0
        for name in sys.argv[2].split('|'):
            flags |= getattr(os, name)
        try:
            fd = os.open(sys.argv[1], flags, 0o600)
            print('ok', flush=True)
        except OSError as e:
            print('err', e.errno, flush=True)
            sys.exit(0)
        for line in sys.stdin:
            words = line.rstrip('\\n').split(' ', 2)
            try:
                if words[0] == 'pwrite':
                    os.pwrite(fd, words[2].encode(), int(words[1]))
                elif words[0] == 'write':
                    data = bytes.fromhex(words[1])
                    while data:
                        data = data[os.write(fd, data):]
                elif words[0] == 'ftruncate':
                    os.ftruncate(fd, int(words[1]))
                elif words[0] == 'fallocate':
                    os.posix_fallocate(fd, int(words[1]), int(words[2]))
                elif words[0] == 'read':
                    os.pread(fd, 4096, 0)
                elif words[0] == 'fsync':
                    os.fsync(fd)
                elif words[0] == 'list':
                    os.listdir(fd)
                elif words[0] == 'close':
                    os.close(fd)
                elif words[0] == 'map':
                    m = mmap.mmap(fd, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
                elif words[0] == 'mapwrite':
                    data = bytes.fromhex(words[1])
                    m[:len(data)] = data
                elif words[0] == 'msync':
                    m.flush()
                elif words[0] == 'unmap':
                    m.close()
                print('ok', flush=True)
            except OSError as e:
                print('err', e.errno, flush=True)
            except Exception:
                # A mapping that failed leaves none to use: an error, not the end of the helper.
                print('err -1', flush=True)
        """

    /// `flags` like "O_WRONLY|O_TRUNC". Throws if the open fails.
    init(_ path: String, _ flags: String) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", HeldDescriptor.script, path, flags]
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        let first = readLine()
        guard first == "ok" else { throw FixtureError("open \(path) failed: \(first)") }
    }

    deinit {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }

    private func readLine() -> String {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while Glibc.read(output.fileHandleForReading.fileDescriptor, &byte, 1) == 1 && byte != 0x0A { bytes.append(byte) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Sends one command; returns 0 or the errno it failed with.
    @discardableResult
    func send(_ command: String) -> Int32 {
        input.fileHandleForWriting.write(Data((command + "\n").utf8))
        let reply = readLine()
        return reply == "ok" ? 0 : Int32(reply.split(separator: " ").last ?? "") ?? -1
    }

    func write(_ bytes: [UInt8]) -> Int32 {
        send("write " + bytes.map { String(format: "%02x", $0) }.joined())
    }
}

/// The start of the Python scripts run on tmpfs and on a mount to compare: `p` records a line
/// of output, `P` names a file in the directory `d`, `attempt` gives a call's result or its
/// errno's name. They need the script's own `import errno, os` and `d` by the time they run.
let pythonOutcomeHelpers = #"""
        out = []
        def p(*words): out.append(' '.join(str(w) for w in words))
        def P(name): return os.path.join(d, name)
        def attempt(f, *a):
            try:
                r = f(*a)
                return r if r is not None else 'ok'
            except OSError as e:
                return 'errno=' + errno.errorcode[e.errno]

        """#

/// Runs a Python `script DIRECTORY ARGUMENTS...` on a fresh tmpfs and on the mount and expects
/// the same lines from both: any difference is a bug. `tmpfsArguments` and `mountArguments`
/// follow the directory (a script may set limits on tmpfs that the mount keeps by itself).
func expectSameOutputAsTmpfs(_ m: MountFixture, script: String, tmpfsArguments: [String] = [], mountArguments: [String] = [],
                             atLeast lines: Int) throws {
    let tmpfs = m.cli.directory + "/tmpfs"
    try FileManager.default.createDirectory(atPath: tmpfs, withIntermediateDirectories: true)
    #expect(try run("/bin/mount", ["-t", "tmpfs", "-o", "size=16m", "tmpfs", tmpfs]).status == 0)
    defer { _ = try? run("/bin/umount", [tmpfs]) }
    func outcome(in directory: String, _ arguments: [String]) throws -> [String] {
        let result = try run("/usr/bin/python3", ["-c", script, directory] + arguments)
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdoutText.split(separator: "\n").map(String.init)
    }
    let expected = try outcome(in: tmpfs, tmpfsArguments)
    let got = try outcome(in: m.mountpoint, mountArguments)
    #expect(expected.count >= lines)
    for (line, (want, have)) in zip(expected, got).enumerated() {
        #expect(want == have, "line \(line): tmpfs and the mount differ")
    }
    #expect(expected.count == got.count)
}

/// A `--confirm-with` command that answers what the file `answer` in its directory says
/// (`allow`: 0, `hang`: never, else 1), and appends each question to `asked`.
final class ScriptedConfirmation {
    let directory = NSTemporaryDirectory() + "keychainfs-answers-" + UUID().uuidString

    init() throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    var command: String {
        """
        echo "$KEYCHAINFS_PID $KEYCHAINFS_ACCESS $KEYCHAINFS_PATH" >> \(directory)/asked
        case "$(cat \(directory)/answer)" in
          allow) exit 0 ;;
          hang) exec sleep 60 ;;
          *) exit 1 ;;
        esac
        """
    }
}

/// The first lines of a script run in a mount namespace of its own (`unshare --mount`): the new
/// namespace starts with a copy of every mount, other tests' FUSE mounts included, and a copy
/// keeps its filesystem alive, so another test's `keychainfs unmount` would wait for a daemon
/// that does not hear of the unmount until this namespace ends. Dropping the copies here (lazily,
/// in this namespace only: its propagation is private) leaves other tests' mounts to them.
let releaseOtherTestsMounts = #"""
    awk '$3 ~ /^fuse\./ { print $2 }' /proc/self/mounts | while read -r copy; do umount -l "$copy" 2>/dev/null || true; done

    """#
