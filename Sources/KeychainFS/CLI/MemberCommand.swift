import ArgumentParser

/// `keychainfs member ...`: a person's own key pair, which team vaults wrap their master key to.
struct MemberCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "member",
        abstract: "Make or show your member key (a key pair, its secret half sealed under your passphrase).",
        subcommands: [MemberInit.self, MemberShow.self]
    )
}
