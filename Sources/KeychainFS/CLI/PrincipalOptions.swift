import ArgumentParser
import VaultCore

/// Whom a rule names: `--exe FILE` or `--unit NAME`, exactly one (for `disallow`, or `--all`).
struct PrincipalOptions: ParsableArguments {
    @Option(name: .customLong("exe"), help: ArgumentHelp("Processes running this executable file (an absolute path).", valueName: "FILE"))
    var executable: String?

    @Option(name: .customLong("unit"), help: ArgumentHelp("Processes in this systemd unit or scope, such as nginx.service.", valueName: "NAME"))
    var unit: String?

    /// How many of the two were given; the command checks it with its own alternatives.
    var count: Int { (executable == nil ? 0 : 1) + (unit == nil ? 0 : 1) }

    /// The principal for a new rule: an executable must be a file there now (its device and
    /// inode are kept, so `rules` can tell when it was replaced).
    func principalForNewRule() throws(AccessRuleError) -> Principal {
        if let executable { return try Principal.executable(at: executable) }
        return try Principal.unit(named: unit ?? "")
    }

    /// The principal of an existing rule, found by its path or name: the file may be gone
    /// since (which is often why its rule goes), so only the path's form is checked.
    func principalOfExistingRule() throws(AccessRuleError) -> Principal {
        if let executable {
            guard executable.hasPrefix("/") else { throw .executableNotAbsolute(executable) }
            return .executable(path: executable, device: 0, inode: 0, fingerprint: nil)
        }
        return try Principal.unit(named: unit ?? "")
    }
}
