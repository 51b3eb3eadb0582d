import ArgumentParser
import VaultCore

/// Where the member key file is (`member init`, `member show`).
struct MemberKeyOptions: ParsableArguments {
    @Option(name: .customLong("member-key"), help: "The member key file (default: $XDG_DATA_HOME/keychainfs/member.key, else ~/.local/share/keychainfs/member.key).")
    var memberKeyPath: String?

    var resolvedPath: String { memberKeyPath ?? MemberKey.defaultPath }
}
