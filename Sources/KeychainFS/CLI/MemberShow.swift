import ArgumentParser
import VaultCore

struct MemberShow: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Print your member public key (base64) on the last line; needs no passphrase."
    )

    @OptionGroup var key: MemberKeyOptions

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let path = key.resolvedPath
            let publicKey = try MemberKey.publicKey(at: path)
            print("member key \(path)")
            if publicKey.signingKey == nil {
                // Made before format 11: its X25519 key has no Ed25519 key behind it to sign with.
                print("this key cannot sign team log entries: make a new one (member init --member-key FILE) and be added with it")
            }
            print(publicKey.base64)
        }
    }
}
