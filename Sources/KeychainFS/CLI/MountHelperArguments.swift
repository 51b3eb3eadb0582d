import Daemon
import Support

/// The command line mount(8) gives a FUSE filesystem: fuse3's mount.fuse3 runs
/// `keychainfs VAULT MOUNTPOINT -o OPTIONS` (for `mount -t fuse.keychainfs` and fstab lines),
/// which is turned here into the `keychainfs mount` command it means.
enum MountHelperArguments {
    struct Refusal: Error {
        let message: String
    }

    /// Flags the kernel enforces on the mount itself; passed on (`--kernel-option`).
    static let kernelOptions: Set<String> = ["ro", "noexec"]

    /// What mount(8) and mount.fuse3 add on their own, and the defaults this mount always has:
    /// rw, exec, noatime (nothing stores access times); never setuid programs or devices
    /// (libfuse's nosuid,nodev stay, whatever dev or suid says); the fstab-only words
    /// (noauto, user, nofail, x-systemd.*, ...) mean nothing to the filesystem.
    private static let ignored: Set<String> = ["rw", "exec", "dev", "nodev", "suid", "nosuid", "async", "noatime",
                                               "nodiratime", "relatime", "defaults", "auto", "noauto", "user", "nouser",
                                               "users", "owner", "group", "nofail", "_netdev"]

    /// The `keychainfs mount` arguments for a `VAULT MOUNTPOINT [-o OPTIONS]...` command line,
    /// or nil when the arguments are not of that form (the ordinary parser takes them).
    static func translate(_ arguments: [String], subcommands: Set<String>) throws(Refusal) -> [String]? {
        guard arguments.count >= 2, !subcommands.contains(arguments[0]),
              !arguments[0].hasPrefix("-"), !arguments[1].hasPrefix("-") else { return nil }
        var options: [Substring] = []
        var rest = arguments.dropFirst(2)
        while let word = rest.first {
            if word == "-o", rest.count >= 2 {
                options += rest.dropFirst().first!.split(separator: ",")
                rest = rest.dropFirst(2)
            } else if word.hasPrefix("-o"), word.count > 2 {
                options += word.dropFirst(2).split(separator: ",")
                rest = rest.dropFirst()
            } else {
                return nil
            }
        }
        // mount(8) helpers say nothing on success; errors stay one line on stderr.
        var mount = ["mount", "--quiet", "--vault", arguments[0]]
        for option in options {
            let (name, value) = split(option)
            switch name {
            case "passfile":
                mount += ["--passphrase-file", try required(value, of: name)]
            case "idle_lock":
                let duration = try required(value, of: name)
                guard LockTriggers.parseDuration(duration) != nil else {
                    throw Refusal(message: "mount option idle_lock takes a duration such as 30s, 15m or 1h, not '\(duration)'")
                }
                mount += ["--idle-lock", duration]
            case "remount_wait":
                let duration = try required(value, of: name)
                guard Mount.seconds(duration) != nil else {
                    throw Refusal(message: "mount option remount_wait takes 0 or a duration such as 10s or 1m, not '\(duration)'")
                }
                mount += ["--remount-wait", duration]
            case "log_days", "log_entries":
                let count = try required(value, of: name)
                guard let number = Int(count), number >= 0 else {
                    throw Refusal(message: "mount option \(name) takes a number, 0 or more, not '\(count)'")
                }
                mount += [name == "log_days" ? "--log-days" : "--log-entries", String(number)]
            case "busy_poll_us":
                let count = try required(value, of: name)
                guard let number = Int(count), (0...1_000_000).contains(number) else {
                    throw Refusal(message: "mount option busy_poll_us takes a number from 0 to 1000000, not '\(count)'")
                }
                mount += ["--busy-poll-us", String(number)]
            case "sync":
                // mount(8)'s own word for it; async, the default, is ignored below.
                guard value == nil else { throw Refusal(message: "mount option sync takes no value") }
                mount.append("--sync")
            case "secret_service":
                guard value == nil else { throw Refusal(message: "mount option secret_service takes no value") }
                mount.append("--secret-service")
            case "accept_rollback":
                guard value == nil else { throw Refusal(message: "mount option accept_rollback takes no value") }
                mount.append("--accept-rollback")
            case _ where value == nil && kernelOptions.contains(name):
                mount += ["--kernel-option", name]
            case _ where value == nil && ignored.contains(name):
                continue
            case _ where name.hasPrefix("x-") || name == "comment":
                continue
            default:
                throw Refusal(message: "unknown mount option '\(Terminal.printable(String(option)))'")
            }
        }
        return mount + [arguments[1]]
    }

    private static func split(_ option: Substring) -> (name: String, value: String?) {
        guard let equals = option.firstIndex(of: "=") else { return (String(option), nil) }
        return (String(option[..<equals]), String(option[option.index(after: equals)...]))
    }

    private static func required(_ value: String?, of name: String) throws(Refusal) -> String {
        guard let value, !value.isEmpty else { throw Refusal(message: "mount option \(name) needs a value (\(name)=...)") }
        return value
    }
}
