extension Vault {
    /// A listener for what other sessions (other processes, other machines) commit to this
    /// vault, on a connection of its own; nil for a vault file, which has no such channel
    /// (its readers compare `changeStamp()` instead). Needs no key.
    public func changeListener() -> VaultChangeListener? {
        try? withStorage { (storage) throws(VaultError) in storage.changeListener() }
    }
}
