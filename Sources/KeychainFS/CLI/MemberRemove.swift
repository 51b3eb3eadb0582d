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
            know a shared passphrase). Opened with --member, every passphrase slot is deleted.
            """
    )

    @OptionGroup var vault: VaultOptions
    @Argument(help: "The member's name.") var name: String

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let removal: MemberRemoval
            if vault.resolvedMemberKeyPath != nil {
                removal = try vault.openVault().removeMember(name: name)
            } else {
                let path = vault.resolvedVaultPath
                try Vault.checkOpenable(at: path)
                let passphrase = try vault.passphrase()
                removal = try Vault.open(at: path, passphrase: passphrase, acceptingRollback: vault.acceptRollback).removeMember(name: name, passphrase: passphrase)
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
        }
    }
}
