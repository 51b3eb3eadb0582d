import ArgumentParser
import Support
import VaultCore

struct TPMPINAdd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Add a TPM PIN slot to the vault (opened with its passphrase); the new PIN is asked twice, or read from --pin-file.",
        discussion: "A vault has one PIN slot; `tpm-pin remove` and `add` enrol it again (after a firmware update changed a bound PCR, or on another machine)."
    )

    @OptionGroup var vault: VaultOptions
    @OptionGroup var selection: PCRSelection

    @Option(help: "Argon2id cost of the PIN: interactive, moderate or sensitive.")
    var kdf: KDFPreset = .moderate

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            guard vault.resolvedMemberKeyPath == nil else {
                throw .invalidArgument("a vault with members takes no TPM PIN slot")
            }
            let pcrs = try selection.pcrs()
            let path = vault.resolvedVaultPath
            try Vault.checkOpenable(at: path)
            // Before any secret is asked: without a TPM there is nothing to seal with.
            try Vault.checkTPMForPINSlot()
            // The passphrase, not the PIN: --pin-file here gives the new PIN.
            let opened = try Vault.open(at: path, passphrase: try vault.passphrase(), acceptingRollback: vault.acceptRollback)
            if try opened.pinSlotPCRs() != nil {
                throw .alreadyExists("the vault's TPM PIN slot (`keychainfs tpm-pin remove` first, to enrol it again)")
            }
            let pin = try vault.tpmPIN.pin(prompt: "New TPM PIN: ", confirm: true)
            try opened.addPINSlot(pin: pin, pcrs: pcrs, kdf: kdf.parameters)
            Terminal.printInfo("added a TPM PIN slot to \(VaultLocation.displayName(path))" + TPMPINAdd.binding(pcrs))
        }
    }

    /// How `init` and `add` say what the slot is bound to.
    static func binding(_ pcrs: [Int]) -> String {
        pcrs.isEmpty ? "" : ", bound to PCR " + pcrs.map(String.init).joined(separator: ",")
    }
}
