extension VaultStorage {
    func changeListener() -> VaultChangeListener? { nil }
}
