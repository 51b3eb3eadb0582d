import VaultCore

/// One collection of another Secret Service: its object path, label (locked memory) and its
/// items' object paths (each read on its own, so that a large keyring is never all in memory).
package final class SourceCollection {
    package let path: String
    package let label: SecureBuffer
    package let items: [String]
    /// Whether the service's `default` alias names it (gnome-keyring's login keyring).
    package let isDefault: Bool

    init(path: String, label: consuming SecureBuffer, items: [String], isDefault: Bool) {
        self.path = path
        self.label = label
        self.items = items
        self.isDefault = isDefault
    }
}
