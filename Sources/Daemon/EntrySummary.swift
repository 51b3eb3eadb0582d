import VaultCore

/// What `ls` shows of one entry, from the vault itself or from a daemon's reply; attributes
/// and label only when asked for (`ls --json`). A class because the label cannot be copied.
package final class EntrySummary: Sendable {
    package let name: ItemName
    package let node: NodeSummary
    package let attributes: [Attribute]
    package let label: SecureBuffer?

    package init(name: ItemName, node: NodeSummary, attributes: [Attribute] = [], label: consuming SecureBuffer? = nil) {
        self.name = name
        self.node = node
        self.attributes = attributes
        self.label = label
    }
}
