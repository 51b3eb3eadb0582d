import VaultCore

/// One collection of another Secret Service: its object path, label (locked memory) and items.
package final class SourceCollection {
    package let path: String
    package let label: SecureBuffer
    package let items: [SourceItem]

    init(path: String, label: consuming SecureBuffer, items: [SourceItem]) {
        self.path = path
        self.label = label
        self.items = items
    }
}
