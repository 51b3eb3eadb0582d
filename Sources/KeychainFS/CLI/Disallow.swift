import ArgumentParser
import Support
import VaultCore

struct Disallow: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove a program's rule at an item or dictionary, or with --all every rule there.",
        discussion: """
            With its last rule gone, PATH has no rule set of its own: the nearest one above it decides, or, \
            with none, every program of the user may reach it again.
            """
    )

    @OptionGroup var vault: VaultOptions
    @OptionGroup var principal: PrincipalOptions
    @Flag(help: "Remove every rule at PATH.") var all = false
    @Argument(help: "Item or dictionary path.") var path: String

    func validate() throws {
        guard principal.count + (all ? 1 : 0) == 1 else { throw ValidationError("give exactly one of --exe FILE, --unit NAME or --all") }
    }

    func run() throws {
        try reportingFailures { () throws(CommandFailure) in
            let target = try CommandFailure.vault { () throws(VaultError) in try VaultPath(path) }
            let named = all ? nil : try CommandFailure.rule { () throws(AccessRuleError) in try principal.principalOfExistingRule() }
            let left = try CommandFailure.vault { () throws(VaultError) in try vault.openVault().disallow(named, at: target) }
            if left.isEmpty {
                Terminal.printInfo("\(target): no rules left here; the nearest rule set above it decides, or, with none, every program of yours may reach it")
            }
        }
    }
}
