/// A command that opens a vault with `VaultOptions`: what `KeychainFSCommand.main` reads the
/// process's one offline-replica setting from (`--no-offline`) once the command line is
/// parsed, before anything opens the vault. Not at validation: parsing a command line in a
/// process that does other things (the tests parse every command's help) must not change how
/// that process opens its vaults.
protocol OpensVault {
    var vaultOptions: VaultOptions { get }
}

extension OpensVault where Self: VaultCommandWithOptionGroup {
    var vaultOptions: VaultOptions { vault }
}

/// Commands whose options are `@OptionGroup var vault: VaultOptions`.
protocol VaultCommandWithOptionGroup {
    var vault: VaultOptions { get }
}

extension Allow: OpensVault, VaultCommandWithOptionGroup {}
extension AttributeCommand: OpensVault, VaultCommandWithOptionGroup {}
extension ChangePassphrase: OpensVault, VaultCommandWithOptionGroup {}
extension ClassCommand: OpensVault, VaultCommandWithOptionGroup {}
extension Disallow: OpensVault, VaultCommandWithOptionGroup {}
extension Exec: OpensVault, VaultCommandWithOptionGroup {}
extension ExportCommand: OpensVault, VaultCommandWithOptionGroup {}
extension FindItems: OpensVault, VaultCommandWithOptionGroup {}
extension GetItem: OpensVault, VaultCommandWithOptionGroup {}
extension Init: OpensVault, VaultCommandWithOptionGroup {}
extension LabelCommand: OpensVault, VaultCommandWithOptionGroup {}
extension List: OpensVault, VaultCommandWithOptionGroup {}
extension LogCommand: OpensVault, VaultCommandWithOptionGroup {}
extension MakeDictionary: OpensVault, VaultCommandWithOptionGroup {}
extension MemberAdd: OpensVault, VaultCommandWithOptionGroup {}
extension MemberList: OpensVault, VaultCommandWithOptionGroup {}
extension MemberRemove: OpensVault, VaultCommandWithOptionGroup {}
extension MemberRotateList: OpensVault, VaultCommandWithOptionGroup {}
extension Mount: OpensVault, VaultCommandWithOptionGroup {}
extension Move: OpensVault, VaultCommandWithOptionGroup {}
extension Remove: OpensVault, VaultCommandWithOptionGroup {}
extension Rules: OpensVault, VaultCommandWithOptionGroup {}
extension SecretServiceCommand: OpensVault, VaultCommandWithOptionGroup {}
extension SetItem: OpensVault, VaultCommandWithOptionGroup {}
extension TPMPINAdd: OpensVault, VaultCommandWithOptionGroup {}
extension TPMPINRemove: OpensVault, VaultCommandWithOptionGroup {}
extension Verify: OpensVault, VaultCommandWithOptionGroup {}

extension ImportArchive: OpensVault { var vaultOptions: VaultOptions { options.vault } }
extension ImportCSV: OpensVault { var vaultOptions: VaultOptions { options.vault } }
extension ImportDotenv: OpensVault { var vaultOptions: VaultOptions { options.vault } }
extension ImportSecretService: OpensVault { var vaultOptions: VaultOptions { options.vault } }
extension ImportDirectory: OpensVault { var vaultOptions: VaultOptions { options.vault } }
extension ImportPass: OpensVault { var vaultOptions: VaultOptions { options.vault } }
