import Glibc
import Support
import SystemCalls
import VaultCore

/// The user logging in, as `keychainfs pam-...` becomes them: run as root by the PAM module
/// (libpam's host keeps its privileges), it takes the user's groups, group and user before it
/// reads anything of theirs, and its environment is theirs: HOME from the passwd entry, no
/// XDG_DATA_HOME (a login has none yet), their runtime directory when there is one.
struct LoginUser {
    let name: String
    let uid: uid_t
    let home: String
    /// This program, found while /proc/self is still readable (a process that changed its user is not dumpable).
    let program: String

    /// `descriptors`: how many the module passed (stdin, stderr, fd 3 ...); the host's others are closed.
    static func becoming(_ name: String, keepingDescriptorsBelow descriptors: Int32 = 3) throws(CommandFailure) -> LoginUser {
        let highest = min(Int32(clamping: sysconf(Int32(_SC_OPEN_MAX))), 65536)
        if highest > descriptors { for fd in descriptors..<highest { close(fd) } }
        guard let entry = getpwnam(name) else { throw CommandFailure(message: "no user \(name)", status: .notFound) }
        let uid = entry.pointee.pw_uid, gid = entry.pointee.pw_gid
        let home = String(cString: entry.pointee.pw_dir)
        var link = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &link, link.count - 1)
        let program = length > 0 ? String(decoding: link[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
                                 : CommandLine.arguments[0]
        if getuid() != uid || geteuid() != uid {
            // Only root becomes another user; anyone else runs this for themselves alone.
            guard geteuid() == 0, initgroups(name, gid) == 0, setgid(gid) == 0, setuid(uid) == 0 else {
                throw CommandFailure(message: "cannot become \(name): \(String(cString: strerror(errno)))", status: .failure)
            }
            guard uid == 0 || setuid(0) != 0 else {
                throw CommandFailure(message: "still root after becoming \(name)", status: .failure)
            }
        }
        setenv("HOME", home, 1)
        setenv("USER", name, 1)
        setenv("LOGNAME", name, 1)
        for name in ["XDG_DATA_HOME", "XDG_CONFIG_HOME", "KEYCHAINFS_VAULT"] { unsetenv(name) }
        // pam_systemd's runtime directory when it ran before this module, else logind's usual
        // one; a directory that is not the user's own is not used.
        let offered = getenv("XDG_RUNTIME_DIR").map { String(cString: $0) } ?? "/run/user/\(uid)"
        var status = stat()
        if stat(offered, &status) == 0, status.st_uid == uid, (status.st_mode & S_IFMT) == S_IFDIR {
            setenv("XDG_RUNTIME_DIR", offered, 1)
        } else {
            unsetenv("XDG_RUNTIME_DIR")
        }
        _ = chdir(home)
        return LoginUser(name: name, uid: uid, home: home, program: program)
    }

    /// A path of the module's arguments or the user's configuration: `~/` is the user's home.
    func expanding(_ path: String) -> String {
        if path == "~" { return home }
        return path.hasPrefix("~/") ? home + path.dropFirst(1) : path
    }

    /// `vault=` from the module's line, else the default vault of the passwd entry's home.
    func vault(_ given: String?) -> String {
        given.map(expanding) ?? home + "/.local/share/keychainfs/default.vault"
    }

    /// Whether `vault` names something to open: a file that exists, or a URI (a team vault).
    func hasVault(_ vault: String) -> Bool {
        !vault.hasPrefix("/") || access(vault, F_OK) == 0
    }

    /// Runs `keychainfs ARGUMENTS` with `secret` on its standard input.
    func runSelf(_ arguments: [String], secret: borrowing SecureBuffer) -> Subprocess.Outcome {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return Subprocess.Outcome(status: -1, errorOutput: "cannot create a pipe") }
        // Shorter than a pipe's buffer (SecretInput.maximumPassphraseBytes): written whole before the child runs.
        _ = secret.withUnsafeBytes { Terminal.writeAll(fds[1], $0) }
        close(fds[1])
        defer { close(fds[0]) }
        return Subprocess.run(program, arguments, standardInput: fds[0])
    }
}
