import ArgumentParser
import Glibc
import VaultCore

/// Where the member key file is (`member init`, `member show`).
struct MemberKeyOptions: ParsableArguments {
    @Option(name: .customLong("member-key"), help: "The member key file (default: $XDG_DATA_HOME/keychainfs/member.key, else ~/.local/share/keychainfs/member.key).")
    var memberKeyPath: String?

    var resolvedPath: String { memberKeyPath ?? MemberKey.defaultPath }

    /// `path` from the root, for a daemon that may not share our working directory.
    static func absolute(_ path: String) -> String {
        guard !path.hasPrefix("/"), let cwd = getcwd(nil, 0) else { return path }
        defer { free(cwd) }
        return String(cString: cwd) + "/" + path
    }
}
