import StoragePostgres

/// The PostgreSQL engine's listener (only a vault in PostgreSQL has something to listen to),
/// named here as VaultCore's users have always named it.
public typealias VaultChangeListener = StoragePostgres.VaultChangeListener

extension Vault {
    /// A listener for what other sessions (other processes, other machines) commit to this
    /// vault, on a connection of its own; nil for a vault file, which has no such channel
    /// (its readers compare `changeStamp()` instead). Needs no key.
    public func changeListener() -> VaultChangeListener? {
        try? withStorage { (storage) throws(VaultError) in
            (storage as? PostgresStorage)?.changeListener() ?? (storage as? ReplicatedStorage)?.changeListener()
        }
    }
}
