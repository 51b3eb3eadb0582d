import Daemon
import Support

/// The command line mount(8) gives a FUSE filesystem: fuse3's mount.fuse3 runs
/// `keychainfs VAULT MOUNTPOINT -o OPTIONS` (for `mount -t fuse.keychainfs` and fstab lines),
/// which is turned here into the `keychainfs mount` command it means.
enum MountHelperArguments {
    struct Refusal: Error {
        let message: String
    }

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
        let table = MountOption.all
        for option in options {
            let (name, value) = split(option)
            if let entry = table.first(where: { $0.word == name }) {
                mount.append("--" + entry.name)
                if case .none = entry.value {
                    guard value == nil else { throw Refusal(message: "mount option \(name) takes no value") }
                    continue
                }
                let text = try required(value, of: name)
                // Checked here, to name the word mount(8) was given rather than the option it became.
                var scratch = MountRequest(vault: .init(location: ""), mountpoint: "")
                do throws(MountOption.Refusal) {
                    try entry.apply(&scratch, text)
                } catch {
                    throw Refusal(message: "mount option \(name) \(error.takes), not '\(Terminal.printable(text))'")
                }
                mount.append(text)
            } else if value == nil, let entry = table.first(where: { if case .repeated(let choices) = $0.value { choices.contains(name) } else { false } }) {
                // A word that is the value itself: `-o ro` is `--kernel-option ro`.
                mount += ["--" + entry.name, name]
            } else if value == nil && ignored.contains(name) || name.hasPrefix("x-") || name == "comment" {
                continue
            } else {
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
