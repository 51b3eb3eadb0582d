import ArgumentParser
import Support
import VaultCore

struct MemberInit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Make your member key pair (file 0600, its directory 0700); prints the public key on the last line."
    )

    @OptionGroup var key: MemberKeyOptions
    @OptionGroup var secret: PassphraseOptions

    @Option(help: "Argon2id cost: interactive, moderate or sensitive.")
    var kdf: KDFPreset = .moderate

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let path = key.resolvedPath
            let passphrase = try secret.passphrase(prompt: "New member passphrase: ", confirm: true)
            let publicKey = try MemberKey.create(at: path, passphrase: passphrase, kdf: kdf.parameters)
            Terminal.printInfo("created member key \(path)")
            print(publicKey.base64)
        }
    }
}
