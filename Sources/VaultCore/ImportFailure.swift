/// An import that failed: nothing of it was stored. `entry` is the path of the entry that
/// failed, when one did (nil when the transaction as a whole failed, such as on a full disk).
public struct ImportFailure: Error, CustomStringConvertible {
    public let entry: VaultPath?
    public let error: VaultError

    public var description: String {
        guard let entry else { return "import failed, nothing was imported: \(error)" }
        return "import failed at \(entry.isRoot ? "/" : entry.description), nothing was imported: \(error)"
    }
}
