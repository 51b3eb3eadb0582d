import ArgumentParser
import Support
import VaultCore

struct Allow: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Admit a program to an item or dictionary (and everything below it); others are refused there.",
        discussion: """
            The nearest rule set at or above a path decides alone. A rule for the same --exe or --unit at PATH is \
            replaced. Takes effect in a running mount within a second. --exe FILE is refused when someone other \
            than root could rewrite or replace FILE: FILE or a directory above it (links followed) belongs to \
            another user (you included) or is writable by others (a sticky directory such as /tmp excepted, \
            for a root-owned entry in it); --force allows it anyway.
            """
    )

    @OptionGroup var vault: VaultOptions
    @OptionGroup var principal: PrincipalOptions
    @Flag(name: .customLong("read-only"), help: "Only opening items for reading and listing dictionaries.") var readOnly = false
    @Flag(help: "Ask first (the mount's --confirm-with command) before each access.") var confirm = false
    @Flag(help: "Allow an --exe FILE that someone other than root could rewrite or replace.") var force = false
    @Argument(help: "Item or dictionary path; it must exist.") var path: String

    func validate() throws {
        guard principal.count == 1 else { throw ValidationError("give exactly one of --exe FILE or --unit NAME") }
    }

    func run() throws {
        try reportingFailures { () throws(CommandFailure) in
            let target = try CommandFailure.vault { () throws(VaultError) in try VaultPath(path) }
            let made = try CommandFailure.rule { () throws(AccessRuleError) in
                let made = try principal.principalForNewRule()
                if !force, case .executable(let file, _, _, _) = made, let reason = ExecutableOwnership.replaceableBy(file) {
                    throw .executableReplaceable(path: file, reason: reason)
                }
                return made
            }
            try CommandFailure.vault { () throws(VaultError) in
                try vault.openVault().allow(AccessRule(made, readOnly: readOnly, confirm: confirm), at: target)
            }
        }
    }
}
