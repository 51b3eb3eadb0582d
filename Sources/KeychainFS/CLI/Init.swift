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
            let passphrase = try vault.passphrase(prompt: "New passphrase: ", confirm: true)
            _ = try Vault.create(at: path, passphrase: passphrase, kdf: kdf.parameters, itemSizeLimit: itemSizeLimit)
            Terminal.printInfo("created vault \(VaultLocation.displayName(path))")
        }
    }
}
