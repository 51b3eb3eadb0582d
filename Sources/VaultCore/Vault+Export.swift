/// The whole vault as entries (`keychainfs export`), read in one snapshot.
extension Vault {
    /// Calls `body` with every dictionary (the root first) and item, each before what is below
    /// it, names sorted, and the number of entries in all; items of a class in `excluding` are
    /// left out (their content is never opened) and counted in the result.
    @discardableResult
    public func exportEntries(excluding: Set<AccessibilityClass> = [],
                              _ body: (PortableEntry, _ total: Int) throws(VaultError) -> Void) throws(VaultError) -> Int {
        try reading(naming: .paths) { (store) throws(VaultError) -> Int in
            var rulesByNode: [NodeID: [AccessRule]] = [:]
            for set in try store.ruleSets() { rulesByNode[set.node] = set.rules }
            // The tree first (names and records only), so the total is known before any content is read.
            let tree = try store.tree()
            let order = tree.filter { $0.record.kind == .dictionary || !excluding.contains($0.record.attributes.accessibility) }
            let skipped = tree.count - order.count
            for (path, record) in order {
                let attributes = try store.attributes(of: record)
                let label = try store.attributeValue(ItemProperty.label.storedName, of: record)
                let rules = rulesByNode[record.id] ?? []
                let entry: PortableEntry
                switch record.kind {
                case .item:
                    let content: SecureBuffer
                    do throws(VaultError) {
                        content = try store.content(of: record)
                    } catch .integrityFailure {
                        throw .integrityFailure(path.description)
                    }
                    entry = PortableEntry(item: path, content: content, attributes: attributes, label: label,
                                          contentType: try store.attributeValue(ItemProperty.contentType.storedName, of: record),
                                          accessibility: record.attributes.accessibility, rules: rules)
                case .dictionary:
                    entry = PortableEntry(dictionary: path, attributes: attributes, label: label,
                                          defaultClass: record.attributes.defaultClass, rules: rules)
                }
                try body(entry, order.count)
            }
            return skipped
        }
    }
}
