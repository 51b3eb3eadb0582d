import Foundation
import Glibc
import Testing

/// A user with a known login password (`keychainfs-pam`, made on first use; its home moves to
/// each fixture's scratch directory), a PAM service of the test's own in /etc/pam.d/ stacking
/// pam_unix with the built pam_keychainfs.so, and scripts run in a mount namespace of their own:
/// /run is a fresh tmpfs (the user's runtime directory, /run/user/UID, as logind makes it) and
/// /dev a tmpfs with the devices the tests use bound in and a stand-in syslog on /dev/log, since
/// this machine may run none. What the mounts and the log hold dies with the namespace.
final class PAMLogin {
    static let userName = "keychainfs-pam"
    let uid: uid_t
    let scratch: String
    let home: String
    let service: String
    let password = "login password " + UUID().uuidString.prefix(6)
    /// What the stand-in syslog received, a datagram a line.
    let log: String
    var vault: String { home + "/.local/share/keychainfs/default.vault" }

    /// What the module passed its program, with `recording`: each run's arguments and environment.
    var recorded: String { procText(scratch + "/recorded") }

    /// `moduleArguments`: more arguments on the module's lines (`mount=~/secrets`). `recording`:
    /// the module runs a script of root's that writes down its arguments and environment, then
    /// execs keychainfs.
    init(moduleArguments: String = "", recording: Bool = false) throws {
        if getpwnam(PAMLogin.userName) == nil {
            let made = try KeychainFSTests.run("/usr/sbin/useradd", ["--system", "--no-create-home", "--shell", "/bin/sh", PAMLogin.userName])
            guard made.status == 0 || getpwnam(PAMLogin.userName) != nil else { throw FixtureError("useradd: \(made.stderr)") }
        }
        chmod("/dev/fuse", 0o666)
        guard let entry = getpwnam(PAMLogin.userName) else { throw FixtureError("no user \(PAMLogin.userName)") }
        uid = entry.pointee.pw_uid
        let gid = entry.pointee.pw_gid
        scratch = "/tmp/kfs-pam-" + UUID().uuidString.prefix(8)
        home = scratch + "/home"
        log = scratch + "/syslog"
        service = "keychainfs-test-" + UUID().uuidString.prefix(8).lowercased()
        // Every property is set: from here a failure runs deinit, which removes what was made.
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: false)
        chmod(scratch, 0o755)
        try FileManager.default.createDirectory(atPath: home + "/.local/share/keychainfs", withIntermediateDirectories: true)
        for directory in [home, home + "/.local", home + "/.local/share", home + "/.local/share/keychainfs"] { chown(directory, uid, gid) }
        chmod(home, 0o700)
        let moved = try KeychainFSTests.run("/usr/sbin/usermod", ["--home", home, PAMLogin.userName])
        guard moved.status == 0 else { throw FixtureError("usermod: \(moved.stderr)") }
        let set = try KeychainFSTests.run("/usr/sbin/chpasswd", [], stdin: Data("\(PAMLogin.userName):\(password)\n".utf8))
        guard set.status == 0 else { throw FixtureError("chpasswd: \(set.stderr)") }
        let module = ProcessInfo.processInfo.environment["KEYCHAINFS_TEST_PAM_MODULE"] ?? keychainfsBuildDirectory + "/libpam_keychainfs.so"
        var program = keychainfsBinary
        if recording {
            program = scratch + "/recording-keychainfs"
            try "#!/bin/sh\n{ printf '%s\\n' \"$0\" \"$@\"; env; } >> \(scratch)/recorded\nexec \(keychainfsBinary) \"$@\"\n"
                .write(toFile: program, atomically: true, encoding: .utf8)
            chmod(program, 0o755)
        }
        let ours = "\(module) keychainfs=\(program) \(moduleArguments)"
        let lines = """
            auth required pam_unix.so nodelay
            auth optional \(ours)
            account required pam_unix.so
            session optional \(ours)
            password required pam_unix.so
            password optional \(ours)

            """
        try lines.write(toFile: "/etc/pam.d/" + service, atomically: true, encoding: .utf8)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: "/etc/pam.d/" + service)
        try? FileManager.default.removeItem(atPath: scratch)
    }

    /// Runs `script` (sh -e) in the fixture's namespace, as root: `asuser CMD...` runs as the
    /// user with their environment, `kfs` is keychainfs, `$VAULT` the default vault, `$PASSWORD`
    /// the login password. Mounts at ~/mnt and ~/secrets are unmounted at the end, and a daemon
    /// whose pid the script put in `$service` is stopped.
    @discardableResult
    func run(_ script: String) throws -> RunResult {
        let result = try KeychainFSTests.run(
            "/usr/bin/unshare", ["--mount", "--propagation", "private", "/bin/sh", "-ec", releaseOtherTestsMounts + PAMLogin.preamble + script],
            environment: ["KFS": keychainfsBinary, "U": PAMLogin.userName, "UID_": "\(uid)", "HOME_": home, "SCRATCH": scratch,
                          "SERVICE": service, "LOG": log, "VAULT": vault, "PASSWORD": password],
            directory: scratch)
        return result
    }

    /// The lines the stand-in syslog received from pam_keychainfs.
    var moduleLogLines: [String] {
        procText(log).split(separator: "\n").map(String.init).filter { $0.contains("pam_keychainfs(") }
    }

    private static let preamble = #"""
        mount -t tmpfs -o mode=0755 tmpfs /run
        mkdir -p /run/user && mkdir -m 0700 "/run/user/$UID_" && chown "$U:" "/run/user/$UID_"
        mkdir "$SCRATCH/dev" && mount --bind /dev "$SCRATCH/dev"
        mount -t tmpfs -o mode=0755 tmpfs /dev
        for node in null zero full random urandom tty fuse; do
            [ -e "$SCRATCH/dev/$node" ] || continue
            touch "/dev/$node" && mount --bind "$SCRATCH/dev/$node" "/dev/$node"
        done
        ln -s /proc/self/fd /dev/fd
        /usr/bin/python3 -c '
        import os, socket, sys
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind("/dev/log"); os.chmod("/dev/log", 0o666)
        out = open(sys.argv[1], "ab")
        print("listening", flush=True)
        while True:
            out.write(s.recv(65536).rstrip(b"\0\n") + b"\n"); out.flush()
        ' "$LOG" > "$LOG.ready" &
        syslog=$!
        until grep -q listening "$LOG.ready" 2>/dev/null; do sleep 0.05; done
        asuser() {
            setpriv --reuid "$U" --regid "$U" --clear-groups --reset-env env -i HOME="$HOME_" XDG_RUNTIME_DIR="/run/user/$UID_" \
                PATH=/usr/bin:/bin "$@"
        }
        kfs() { "$KFS" "$@"; }
        finish() {
            for mountpoint in "$HOME_/mnt" "$HOME_/secrets"; do
                if grep -q " $mountpoint " /proc/self/mounts; then asuser "$KFS" unmount "$mountpoint" >/dev/null 2>&1 || umount -l "$mountpoint"; fi
            done
            if [ -n "${service:-}" ]; then kill "$service" 2>/dev/null || true; wait "$service" 2>/dev/null || true; fi
            kill "$syslog"
        }
        trap finish EXIT
        cd "$HOME_"

        """#
}
