import VaultCore

/// The dictionary a migration fills: its path here, the label it gets when made (a
/// collection's), and the items that go in it.
final class IncomingDictionary {
    let path: VaultPath
    let label: SecureBuffer?
    let items: [IncomingItem]

    init(path: VaultPath, label: consuming SecureBuffer?, items: [IncomingItem]) {
        self.path = path
        self.label = label
        self.items = items
    }

    /// A dictionary named after `label` as a Secret Service names an item after its label:
    /// UTF-8 kept, '/' and control characters made '_', a leading '.' made '_' (see
    /// `ItemName.base(fromLabel:)`); `fallback` when the label is empty.
    static func name(fromLabel label: borrowing SecureBuffer, fallback: String) throws(VaultError) -> ItemName {
        guard label.count > 0 else { return try ItemName(fallback) }
        return try ItemName(base: try ItemName.base(fromLabel: label), number: 1)
    }
}
