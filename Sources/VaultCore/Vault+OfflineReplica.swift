import StoragePostgres

extension Vault {
    /// How the vault is served, for a vault in PostgreSQL with an offline replica; nil for
    /// any other (a file, or `--no-offline`).
    public var offlineState: OfflineState? {
        try? withStorage { (storage) throws(VaultError) in (storage as? ReplicatedStorage)?.state }
    }

    /// Brings the offline replica to the server's records (nothing while offline); whether
    /// anything was copied. Needs no key; with one, a server older than the replica is
    /// refused (`.rolledBack`) and served no more.
    @discardableResult
    public func refreshOfflineReplica() throws(VaultError) -> Bool {
        try withStorage { (storage) throws(VaultError) -> Bool in try (storage as? ReplicatedStorage)?.refreshReplica() ?? false }
    }

    /// Throws what a change would fail with now (`.offline`, or `.rolledBack` for a server
    /// older than the replica), for what refuses a change before it is made (an open for
    /// writing, as on a read-only filesystem); nothing while the server is live, or for a file.
    public func refuseChangesWhileNotLive() throws(VaultError) {
        try withStorage { (storage) throws(VaultError) in try (storage as? ReplicatedStorage)?.refuseChangesWhileNotLive() }
    }

    /// Calls `observer` (inside the vault's mutex: it must only signal) after each commit of
    /// this vault's and whenever it goes offline or live.
    public func observeOfflineReplica(_ observer: @escaping @Sendable () -> Void) {
        try? withStorage { (storage) throws(VaultError) in (storage as? ReplicatedStorage)?.onChange = observer }
    }

    /// While offline: tries the server on a connection of its own, outside the vault's mutex
    /// (it may take the connect timeout), and once it answers makes the vault live on it.
    /// Whether the vault is live now.
    public func reconnectIfOffline() -> Bool {
        guard let state = offlineState, !state.isLive else { return true }
        guard state.serverRolledBack == nil, let server = try? PostgresStorage.open(at: path) else { return false }
        return (try? withStorage { (storage) throws(VaultError) -> Bool in (storage as? ReplicatedStorage)?.adopt(server) ?? true }) ?? false
    }
}
