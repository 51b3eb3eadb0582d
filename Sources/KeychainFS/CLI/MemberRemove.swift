import ArgumentParser
import VaultCore

struct MemberRemove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove a member's key slot (the master key is not rotated yet: see the README)."
    )

    @OptionGroup var vault: VaultOptions
    @Argument(help: "The member's name.") var name: String

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let opened = try vault.openVault()
            try opened.removeMember(name: name)
            Terminal.printInfo("removed member \(Terminal.printable(name))")
        }
    }
}
