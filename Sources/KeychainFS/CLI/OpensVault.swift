/// A command that opens a vault with `VaultOptions`: what `KeychainFSCommand.main` reads the
/// process's one offline-replica setting from (`--no-offline`) once the command line is
/// parsed, before anything opens the vault. Not at validation: parsing a command line in a
/// process that does other things (the tests parse every command's help) must not change how
/// that process opens its vaults.
protocol OpensVault {
    var vaultOptions: VaultOptions { get }
}

extension Allow: OpensVault { var vaultOptions: VaultOptions { vault } }
extension AttributeCommand: OpensVault { var vaultOptions: VaultOptions { vault } }
extension ChangePassphrase: OpensVault { var vaultOptions: VaultOptions { vault } }
extension ClassCommand: OpensVault { var vaultOptions: VaultOptions { vault } }
extension Disallow: OpensVault { var vaultOptions: VaultOptions { vault } }
extension Exec: OpensVault { var vaultOptions: VaultOptions { vault } }
extension ExportCommand: OpensVault { var vaultOptions: VaultOptions { vault } }
extension FindItems: OpensVault { var vaultOptions: VaultOptions { vault } }
extension GetItem: OpensVault { var vaultOptions: VaultOptions { vault } }
extension Init: OpensVault { var vaultOptions: VaultOptions { vault } }
extension LabelCommand: OpensVault { var vaultOptions: VaultOptions { vault } }
extension List: OpensVault { var vaultOptions: VaultOptions { vault } }
extension LogCommand: OpensVault { var vaultOptions: VaultOptions { vault } }
extension MakeDictionary: OpensVault { var vaultOptions: VaultOptions { vault } }
extension MemberAdd: OpensVault { var vaultOptions: VaultOptions { vault } }
extension MemberList: OpensVault { var vaultOptions: VaultOptions { vault } }
extension MemberRemove: OpensVault { var vaultOptions: VaultOptions { vault } }
extension MemberRotateList: OpensVault { var vaultOptions: VaultOptions { vault } }
extension Mount: OpensVault { var vaultOptions: VaultOptions { vault } }
extension Move: OpensVault { var vaultOptions: VaultOptions { vault } }
extension Remove: OpensVault { var vaultOptions: VaultOptions { vault } }
extension Rules: OpensVault { var vaultOptions: VaultOptions { vault } }
extension SecretServiceCommand: OpensVault { var vaultOptions: VaultOptions { vault } }
extension SetItem: OpensVault { var vaultOptions: VaultOptions { vault } }
extension TPMPINAdd: OpensVault { var vaultOptions: VaultOptions { vault } }
extension TPMPINRemove: OpensVault { var vaultOptions: VaultOptions { vault } }
extension Verify: OpensVault { var vaultOptions: VaultOptions { vault } }

extension ImportArchive: OpensVault { var vaultOptions: VaultOptions { options.vault } }
extension ImportCSV: OpensVault { var vaultOptions: VaultOptions { options.vault } }
extension ImportDotenv: OpensVault { var vaultOptions: VaultOptions { options.vault } }
extension ImportSecretService: OpensVault { var vaultOptions: VaultOptions { options.vault } }
extension ImportDirectory: OpensVault { var vaultOptions: VaultOptions { options.vault } }
extension ImportPass: OpensVault { var vaultOptions: VaultOptions { options.vault } }
