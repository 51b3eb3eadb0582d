import VaultCore

/// A dictionary a migration fills: its path here, the label it gets when made (a
/// collection's), and how many items its source has for it.
final class IncomingDictionary {
    let path: VaultPath
    let label: SecureBuffer?
    let count: Int

    init(path: VaultPath, label: consuming SecureBuffer?, count: Int) {
        self.path = path
        self.label = label
        self.count = count
    }

    /// A dictionary named after `label` as a Secret Service names an item after its label:
    /// UTF-8 kept, '/' and control characters made '_', a leading '.' made '_' (see
    /// `ItemName.base(fromLabel:)`); `fallback` when the label is empty.
    static func name(fromLabel label: borrowing SecureBuffer, fallback: String) throws(VaultError) -> ItemName {
        guard label.count > 0 else { return try ItemName(fallback) }
        return try ItemName(base: try ItemName.base(fromLabel: label), number: 1)
    }
}
