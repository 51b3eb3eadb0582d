import ArgumentParser
import Support
import VaultCore

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Create a new vault (file 0600, its directory 0700).")

    @OptionGroup var vault: VaultOptions

    @Option(help: "Argon2id cost: interactive, moderate or sensitive.")
    var kdf: KDFPreset = .moderate

    @Option(name: .customLong("item-size-limit"), help: "Largest item in bytes (default 1 MiB).")
    var itemSizeLimit: Int = Vault.defaultItemSizeLimit

    @Option(help: "With --member or --member-key: your member name in the new vault (what `member remove` takes).")
    var name: String?

    @Flag(name: .customLong("tpm-pin"),
          help: "Also add a TPM PIN slot: a short PIN (asked twice, or --pin-file FILE) that opens the vault on this machine, its guessing stopped by the TPM's lockout; the passphrase stays the recovery.")
    var tpmPIN = false

    @OptionGroup var selection: PCRSelection

    func validate() throws {
        if vault.tpmPIN.asked { throw ValidationError("init takes --tpm-pin to add a TPM PIN slot (--pin opens a vault with one)") }
        if !tpmPIN && (vault.tpmPIN.file != nil || selection.list != nil) {
            throw ValidationError("--pin-file and --tpm-pcrs on init go with --tpm-pin")
        }
        if tpmPIN && vault.resolvedMemberKeyPath != nil { throw ValidationError("a vault with members takes no TPM PIN slot") }
    }

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let path = vault.resolvedVaultPath
            if let memberKeyPath = vault.resolvedMemberKeyPath {
                // A team vault: the creator's member slot is its only way in, no shared passphrase.
                guard let name else { throw .invalidArgument("init --member needs --name NAME (your name in the vault)") }
                _ = try MemberKey.publicKey(at: memberKeyPath)
                let member = try MemberKey.open(at: memberKeyPath, passphrase: try vault.passphrase(prompt: "Member passphrase: "))
                _ = try Vault.create(at: path, member: member, name: name, itemSizeLimit: itemSizeLimit)
                Terminal.printInfo("created vault \(VaultLocation.displayName(path)), opened by member \(Terminal.printable(name)) only")
                return
            }
            guard name == nil else { throw .invalidArgument("--name goes with --member (a vault made by a member)") }
            if tpmPIN {
                let pcrs = try selection.pcrs()
                // Before any secret is asked: without a TPM there is nothing to seal with.
                try Vault.checkTPMForPINSlot()
                let passphrase = try vault.passphrase(prompt: "New passphrase (the recovery when the TPM refuses): ", confirm: true)
                let pin = try vault.tpmPIN.pin(prompt: "New TPM PIN: ", confirm: true)
                _ = try Vault.create(at: path, passphrase: passphrase, pin: pin, pcrs: pcrs, kdf: kdf.parameters, itemSizeLimit: itemSizeLimit)
                Terminal.printInfo("created vault \(VaultLocation.displayName(path)), with a TPM PIN slot" + TPMPINAdd.binding(pcrs))
                return
            }
            let passphrase = try vault.passphrase(prompt: "New passphrase: ", confirm: true)
            _ = try Vault.create(at: path, passphrase: passphrase, kdf: kdf.parameters, itemSizeLimit: itemSizeLimit)
            Terminal.printInfo("created vault \(VaultLocation.displayName(path))")
        }
    }
}
