import Foundation
import Glibc
import Testing

/// A vault mounted by an ordinary user (`keychainfs-test`, made on first use), for attacks by
/// that user's own programs: the mount's daemon and every program here run as that user,
/// with no privilege the user lacks. A scratch directory of root's (0755) holds what the user
/// must not be able to change: the attack programs built from Tests/Attacks and the programs
/// the rules admit.
final class UserMount {
    static let userName = "keychainfs-test"
    let uid: uid_t
    let gid: gid_t
    /// The user's own directory (0700): vault, passphrase file, mountpoint, runtime directory.
    let home: String
    /// Root's directory (0755) of programs the user may run and not change.
    let programs: String
    let vault: String
    let passphraseFile: String
    let mountpoint: String
    /// The user's own session bus, when the mount serves the Secret Service on it.
    private let bus: PrivateSessionBus?
    var busEnvironment: [String: String] { bus?.environment ?? [:] }

    init(secretService: Bool = false) throws {
        if getpwnam(UserMount.userName) == nil {
            let made = try KeychainFSTests.run("/usr/sbin/useradd", ["--system", "--no-create-home", "--shell", "/bin/sh", UserMount.userName])
            guard made.status == 0 || getpwnam(UserMount.userName) != nil else { throw FixtureError("useradd: \(made.stderr)") }
        }
        // Debian's udev makes /dev/fuse 0666; a container may leave it root's alone, and libfuse
        // falls back to fusermount3 only when mount(2) is refused, not when the open is.
        chmod("/dev/fuse", 0o666)
        guard let entry = getpwnam(UserMount.userName) else { throw FixtureError("no user \(UserMount.userName)") }
        uid = entry.pointee.pw_uid
        gid = entry.pointee.pw_gid
        let scratch = "/tmp/kfs-attack-" + UUID().uuidString.prefix(8)
        home = scratch + "/home"
        programs = scratch + "/programs"
        // Root's, 0755 all the way down from /tmp (sticky, root's): nothing here is the user's to change.
        for directory in [scratch, programs] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
            chmod(directory, 0o755)
        }
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: false)
        chown(home, uid, gid)
        chmod(home, 0o700)
        vault = home + "/vault"
        passphraseFile = home + "/pw"
        mountpoint = home + "/mnt"
        bus = secretService ? try PrivateSessionBus(user: UserMount.userName) : nil
        let setUp = try shell("printf 'correct horse battery staple\\n' > pw && mkdir -m 0700 mnt run && chmod 0600 pw")
        guard setUp.status == 0 else { throw FixtureError("setup: \(setUp.stderr)") }
        let created = try cli(["init", "--kdf", "interactive"])
        guard created.status == 0 else { throw FixtureError("init: \(created.stderr)") }
        let mounted = try run(keychainfsBinary, ["mount", "--vault", vault, "--passphrase-file", passphraseFile,
                                                  "--kdf", "interactive"] + (secretService ? ["--secret-service"] : []) + [mountpoint],
                              environment: busEnvironment)
        guard mounted.status == 0 else { throw FixtureError("mount: \(mounted.stderr)") }
    }

    deinit {
        _ = try? run(keychainfsBinary, ["unmount", mountpoint])
        if isMounted(mountpoint) { _ = try? Foundation.Process.run(URL(fileURLWithPath: "/bin/fusermount3"), arguments: ["-u", "-z", mountpoint]) }
        try? FileManager.default.removeItem(atPath: (home as NSString).deletingLastPathComponent)
    }

    func path(_ relative: String) -> String { mountpoint + "/" + relative }

    /// `program ARGS` as the user, in its home, with a minimal environment plus `environment`.
    @discardableResult
    func run(_ program: String, _ arguments: [String], environment: [String: String] = [:], stdin: Data? = nil) throws -> RunResult {
        var env = ["HOME": home, "XDG_RUNTIME_DIR": home + "/run", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"]
        for (key, value) in environment { env[key] = value }
        return try KeychainFSTests.run("/usr/bin/setpriv", ["--reuid", "\(uid)", "--regid", "\(gid)", "--clear-groups", "--reset-env",
                                                            "/usr/bin/env", "-i"] + env.sorted { $0.key < $1.key }.map { "\($0)=\($1)" }
                                                            + [program] + arguments, stdin: stdin, directory: home)
    }

    @discardableResult
    func shell(_ script: String, environment: [String: String] = [:]) throws -> RunResult {
        try run("/bin/sh", ["-c", script], environment: environment)
    }

    /// `keychainfs SUBCOMMAND --vault V --passphrase-file P ARGS...` as the user.
    @discardableResult
    func cli(_ arguments: [String]) throws -> RunResult {
        var args = arguments
        args.insert(contentsOf: ["--vault", vault, "--passphrase-file", passphraseFile], at: 1)
        return try run(keychainfsBinary, args)
    }

    /// Builds Tests/Attacks/NAME.c (and the shared libraries it names) into the programs
    /// directory, as root's: the user runs them and cannot change them.
    func build(_ name: String, libraries: [String] = []) throws -> String {
        let sources = UserMount.attacks
        for library in libraries {
            let built = try KeychainFSTests.run("/usr/bin/gcc", ["-O1", "-fPIC", "-shared", "-Wl,-z,now", "-o", "\(programs)/lib\(library).so",
                                                                 "\(sources)/lib\(library).c"])
            guard built.status == 0 else { throw FixtureError("gcc lib\(library): \(built.stderr)") }
        }
        let built = try KeychainFSTests.run("/usr/bin/gcc", ["-O1", "-Wl,-z,now", "-o", "\(programs)/\(name)", "\(sources)/\(name).c",
                                                             "-L", programs, "-Wl,-rpath,\(programs)"] + libraries.map { "-l\($0)" })
        guard built.status == 0 else { throw FixtureError("gcc \(name): \(built.stderr)") }
        return "\(programs)/\(name)"
    }

    /// Tests/Attacks/NAME (a Python script) with the modules it imports, copied into the
    /// programs directory: the user may not be able to reach the repository.
    func script(_ name: String) throws -> String {
        for file in try FileManager.default.contentsOfDirectory(atPath: UserMount.attacks) where file.hasSuffix(".py") {
            if !FileManager.default.fileExists(atPath: "\(programs)/\(file)") {
                _ = try install("\(UserMount.attacks)/\(file)", as: file, mode: 0o644)
            }
        }
        return "\(programs)/\(name)"
    }

    /// Where the attack programs' sources are.
    static let attacks = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Attacks").path

    /// A copy of `original` in the programs directory (root's, 0755), for a rule to admit.
    func install(_ original: String, as name: String, mode: mode_t = 0o755, group: gid_t? = nil) throws -> String {
        let path = "\(programs)/\(name)"
        try? FileManager.default.removeItem(atPath: path)
        guard let real = realpath(original, nil) else { throw FixtureError("no \(original)") }
        defer { free(real) }
        try copyExecutable(String(cString: real), to: path)
        if let group { chown(path, 0, group) }
        chmod(path, mode)
        return path
    }

    /// Stores `secret` at `item` through the mount, then adds the rule and waits until it
    /// applies (the daemon reads rules again within a second): until /bin/cat is refused.
    func guardItem(_ item: String, _ secret: String, allow arguments: [String]) throws {
        let stored = try shell("mkdir -p \"$(dirname mnt/\(item))\" && printf %s '\(secret)' > mnt/\(item)")
        guard stored.status == 0 else { throw FixtureError("store: \(stored.stderr)") }
        let allowed = try cli(["allow", (item as NSString).deletingLastPathComponent] + arguments)
        guard allowed.status == 0 else { throw FixtureError("allow: \(allowed.stderr)") }
        let applied = try eventually(within: 2) { try run("/bin/cat", [path(item)]).status != 0 }
        guard applied else { throw FixtureError("the rule did not apply") }
    }
}
