/// One item of a rotation list (`Vault.itemsToRotate`): a secret a removed member could read.
public struct ItemToRotate: Sendable {
    public let path: VaultPath
    /// The member's newest read of it that the team log records; nil when it records none.
    public let lastRead: Timestamp?
    /// When its content last changed.
    public let modified: Timestamp
    /// Whether its content changed after the member was removed: the value they could know is
    /// no longer the item's.
    public let changedSinceRemoval: Bool
}
