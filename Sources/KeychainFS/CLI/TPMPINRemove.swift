import ArgumentParser
import Support
import VaultCore

struct TPMPINRemove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove the vault's TPM PIN slot (opened with its passphrase, or its PIN); the passphrase slot stays.",
        discussion: "Exits with status \(ExitStatus.notFound.rawValue) when the vault has no PIN slot."
    )

    @OptionGroup var vault: VaultOptions

    func run() throws {
        try reportingFailures { () throws(CommandFailure) in
            let removed = try CommandFailure.vault { () throws(VaultError) -> Bool in try vault.openVault().removePINSlot() }
            guard removed else { throw CommandFailure(message: "the vault has no TPM PIN slot", status: .notFound) }
            Terminal.printInfo("removed the TPM PIN slot of \(VaultLocation.displayName(vault.resolvedVaultPath))")
        }
    }
}
