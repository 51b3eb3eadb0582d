/// What `Vault.removeMember` did: the slot deleted, the master key rotated, and which ways into
/// the vault are left.
public struct MemberRemoval: Sendable {
    /// Records sealed again under the new master key (nodes, contents, attributes, access
    /// rules, access log batches).
    public let recordsResealed: Int
    /// The members whose slots now hold the new master key, by name.
    public let keptMembers: [String]
    /// Whether the passphrase slot the vault was opened with was rewrapped with its passphrase.
    public let keptPassphraseSlot: Bool
    /// Passphrase slots deleted: they wrapped the old key, under a passphrase that the removed
    /// member may know.
    public let droppedPassphraseSlots: Int
}
