import StoragePostgres

extension Vault {
    /// Calls `observer` once when the storage loses its connection to its server and once when
    /// a later call has connected again. Only a vault in PostgreSQL has a connection; for a
    /// file this does nothing. The observer runs inside the vault's mutex, so it must not call
    /// the vault.
    public func observeStorageConnection(_ observer: @escaping @Sendable (StorageConnectionEvent) -> Void) {
        try? withStorage { (storage) throws(VaultError) in
            (storage as? PostgresStorage)?.observeConnection(observer)
            (storage as? ReplicatedStorage)?.observeConnection(observer)
        }
    }
}
