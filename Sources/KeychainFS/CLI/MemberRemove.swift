import ArgumentParser
import Support
import VaultCore

struct MemberRemove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove a member: delete their key slot and rotate the master key, re-encrypting every record in one transaction.",
        discussion: """
            Every other member's slot is rewrapped to the new key. Opened with a vault passphrase, that \
            passphrase's slot is rewrapped too; every other passphrase slot is deleted (a removed member may \
            know a shared passphrase). Opened with --member, every passphrase slot is deleted. Then it lists \
            every item the member could read, with their last read from the team log (`member rotate-list` \
            prints it again later).
            """
    )

    @OptionGroup var vault: VaultOptions
    @Flag(help: "Print the list of items to change as JSON (as `member rotate-list --json`).") var json = false
    @Argument(help: "The member's name.") var name: String

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let removal: MemberRemoval
            let opened: Vault
            if vault.resolvedMemberKeyPath != nil {
                opened = try vault.openVault()
                removal = try opened.removeMember(name: name)
            } else {
                let path = vault.resolvedVaultPath
                try Vault.checkOpenable(at: path)
                let passphrase = try vault.passphrase()
                opened = try Vault.open(at: path, passphrase: passphrase, acceptingRollback: vault.acceptRollback)
                removal = try opened.removeMember(name: name, passphrase: passphrase)
            }
            Terminal.printInfo("removed member \(Terminal.printable(name)); rotated the master key: "
                + "\(removal.recordsResealed) records re-encrypted")
            let members = removal.keptMembers.map { Terminal.printable($0) }.joined(separator: ", ")
            Terminal.printInfo("member slots rewrapped: \(removal.keptMembers.count)" + (members.isEmpty ? "" : " (\(members))")
                + (removal.keptPassphraseSlot ? "; passphrase slot rewrapped: 1" : ""))
            if removal.droppedPassphraseSlots > 0 {
                Terminal.printInfo("deleted \(removal.droppedPassphraseSlots) passphrase slot(s): they wrapped the old master key"
                    + (removal.keptPassphraseSlot ? "" : "; the vault now opens only with member keys"))
            }
            // A member removing themselves is shut out by the rotation: nothing left to list with.
            guard let list = try? opened.itemsToRotate(after: name) else {
                Terminal.printInfo("`keychainfs member rotate-list \(Terminal.printable(name))` lists what they could read")
                return
            }
            try RotationListOutput.write(list, json: json)
        }
    }
}
