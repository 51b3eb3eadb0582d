/// Accessibility classes by path: what `keychainfs class` uses. Each change is one durable
/// transaction.
extension Vault {
    /// Changes an item's class, sealing its content again under the new class's key; on a
    /// dictionary, sets its default class for items created below it (nil clears it, so the
    /// next default up the path applies).
    @discardableResult
    public func setClass(_ accessibility: AccessibilityClass?, at path: VaultPath) throws(VaultError) -> Node {
        try writing(naming: .paths) { (store) throws(VaultError) -> Node in
            let record = try resolve(path, in: store)
            let now = Timestamp.now()
            // In the same transaction: a class change is never made without its entry.
            try appendAccessLog([Vault.ownChange(.classChange, at: path)], in: store)
            switch record.kind {
            case .item:
                guard let accessibility else {
                    throw .invalidArgument("\(path): an item always has a class; only a dictionary's default can be cleared")
                }
                let attributes: NodeAttributes
                do throws(VaultError) {
                    attributes = try store.changeClass(of: record, to: accessibility, at: now)
                } catch .integrityFailure {
                    throw .integrityFailure(path.description)
                }
                return Node(id: record.id, parent: record.parent, attributes: attributes)
            case .dictionary:
                return Node(id: record.id, parent: record.parent,
                            attributes: try store.changeDefaultClass(of: record, to: accessibility, at: now))
            }
        }
    }

    /// The class an item created in the dictionary at `path` gets: the nearest default up the path.
    public func effectiveDefaultClass(at path: VaultPath) throws(VaultError) -> AccessibilityClass {
        try reading(naming: .paths) { (store) throws(VaultError) -> AccessibilityClass in
            let record = try resolve(path, in: store)
            guard record.kind == .dictionary else { throw .notADictionary(path.description) }
            return try store.defaultClass(below: record)
        }
    }
}
