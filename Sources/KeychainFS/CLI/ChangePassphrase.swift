import ArgumentParser
import Support
import VaultCore

struct ChangePassphrase: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "passwd",
        abstract: "Change the passphrase (rewraps the master key; nothing else is re-encrypted)."
    )

    @OptionGroup var vault: VaultOptions

    @Option(name: .customLong("new-passphrase-file"), help: "Read the new passphrase from FILE ('-' for standard input).")
    var newPassphraseFile: String?

    @Option(help: "Argon2id cost for the new passphrase (default: keep the current one).")
    var kdf: KDFPreset?

    func validate() throws {
        if newPassphraseFile == "-" && vault.passphraseFromStandardInput {
            throw ValidationError("standard input cannot carry both passphrases")
        }
    }

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            // Said before either passphrase is asked for: there would be nothing to change.
            guard vault.resolvedMemberKeyPath == nil else {
                throw .invalidArgument("passwd changes a vault passphrase; a member key opens the vault through its own slot, "
                    + "which has none")
            }
            let opened = try vault.openVault()
            let newPassphrase = try SecretInput.passphrase(file: newPassphraseFile, command: nil,
                                                           prompt: "New passphrase: ", confirm: true)
            try opened.changePassphrase(to: newPassphrase, kdf: kdf?.parameters)
            Terminal.printInfo("passphrase changed")
        }
    }
}
