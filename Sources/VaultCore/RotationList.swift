/// What a removed member could read, for the admin to change (`Vault.itemsToRotate`).
public struct RotationList: Sendable {
    public let member: String
    /// When the team log records their removal; nil while they are a member, or when no
    /// removal of that name is recorded.
    public let removed: Timestamp?
    /// Every item, by path.
    public let items: [ItemToRotate]
    /// Batches of the team log that failed their checks: the times above come from the rest.
    public let problems: [IntegrityProblem]
}
