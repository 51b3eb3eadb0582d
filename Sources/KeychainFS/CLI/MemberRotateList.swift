import ArgumentParser
import Support
import VaultCore

struct MemberRotateList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate-list",
        abstract: "List the items a member could read, with their last read from the team log: what to change after removing them.",
        discussion: """
            Every item is listed: a member holds the vault's key, so access rules (which admit programs, not \
            members) never limited what they could read. Each line: path, the member's last read (or `never read`), \
            and `changed since` for an item whose content changed after the removal, else `to change`.
            """
    )

    @OptionGroup var vault: VaultOptions
    @Flag(help: "Print {\"member\", \"removed\", \"items\": [{\"path\", \"lastRead\", \"modified\", \"changedSinceRemoval\"}]}.")
    var json = false
    @Argument(help: "The member's name.") var name: String

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            try RotationListOutput.write(try vault.openVault().itemsToRotate(after: name), json: json)
        }
    }
}
