import ArgumentParser

/// `keychainfs member ...`: a person's own key pair, which team vaults wrap their master key to.
struct MemberCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "member",
        abstract: "Your member key (a key pair, its secret half sealed under your passphrase), and a vault's members.",
        subcommands: [MemberInit.self, MemberShow.self, MemberAdd.self, MemberList.self, MemberRemove.self, MemberRotateList.self]
    )
}
