import ArgumentParser
import VaultCore

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Create a new vault (file 0600, its directory 0700).")

    @OptionGroup var vault: VaultOptions

    @Option(help: "Argon2id cost: interactive, moderate or sensitive.")
    var kdf: KDFPreset = .moderate

    @Option(name: .customLong("item-size-limit"), help: "Largest item in bytes (default 1 MiB).")
    var itemSizeLimit: Int = Vault.defaultItemSizeLimit

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let path = vault.resolvedVaultPath
            let passphrase = try vault.passphrase(prompt: "New passphrase: ", confirm: true)
            _ = try Vault.create(at: path, passphrase: passphrase, kdf: kdf.parameters, itemSizeLimit: itemSizeLimit)
            Terminal.printInfo("created vault \(VaultLocation.displayName(path))")
        }
    }
}
