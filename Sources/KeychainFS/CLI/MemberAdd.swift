import ArgumentParser
import Support
import VaultCore

struct MemberAdd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Add a member: wrap the vault's master key to their public key (run by anyone who can open the vault)."
    )

    @OptionGroup var vault: VaultOptions
    @Argument(help: "The new member's public key, as `keychainfs member show` prints it.") var publicKey: String
    @Option(help: "A name for the member, unique in the vault (what `member remove` takes).") var name: String

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            guard let key = MemberPublicKey(base64: publicKey) else {
                throw .invalidArgument("not a member public key: \(Terminal.printable(publicKey)) (expected the base64 that `keychainfs member show` prints)")
            }
            let opened = try vault.openVault()
            try opened.addMember(name: name, publicKey: key)
            Terminal.printInfo("added member \(Terminal.printable(name))")
        }
    }
}
