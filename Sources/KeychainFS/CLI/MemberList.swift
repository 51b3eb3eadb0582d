import ArgumentParser
import Support
import VaultCore

struct MemberList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the vault's key slots: each member's name and public key, and passphrase slots as such."
    )

    @OptionGroup var vault: VaultOptions
    @Flag(help: "Print [{\"kind\": \"passphrase\", \"slot\": ID} or {\"kind\": \"member\", \"name\", \"publicKey\"}].")
    var json = false

    /// `member list --json`, one per slot.
    struct JSON: Encodable {
        let kind: String
        let slot: Int64?
        let name: String?
        let publicKey: String?
    }

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let slots = try vault.openVault().keySlots()
            if json {
                try JSONOutput.write(slots.map { slot in
                    switch slot {
                    case .passphrase(let id): JSON(kind: "passphrase", slot: id, name: nil, publicKey: nil)
                    case .member(let name, let key): JSON(kind: "member", slot: nil, name: name, publicKey: key.base64)
                    }
                })
                return
            }
            for slot in slots {
                switch slot {
                case .passphrase(let id): print("passphrase slot \(id)")
                case .member(let name, let key): print("member \(Terminal.printable(name)) \(key.base64)")
                }
            }
        }
    }
}
