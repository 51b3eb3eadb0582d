/// What happened to the connection between a vault and its storage's server, for whoever
/// watches it (`Vault.observeStorageConnection`): VaultCore itself logs nothing.
public enum StorageConnectionEvent: Equatable, Sendable {
    /// Calls fail with `.storageUnreachable` from now until a call connects again. `reason`
    /// names the server (without a password) and the cause, and nothing inside the vault.
    case lost(reason: String)
    /// A call connected again; the calls after it work as before.
    case restored
}
