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
            print(publicKey.base64)
        }
    }
}
