/// Many entries stored as one transaction (`keychainfs import`): every entry is stored, or,
/// when one fails, none is and the vault is as it was.
extension Vault {
    /// Stores `entries` in order, in one durable transaction, creating missing dictionaries.
    /// An item that exists is an `.alreadyExists` failure unless `replacing`, when its content,
    /// user attributes, label, content type and rules become the entry's (its class too, when
    /// the entry has one). A dictionary that exists is kept; each of its attributes, label,
    /// default class and rules is set from the entry only where it has none, or with `replacing`.
    /// `progress` is called after each entry with the number done.
    public func importEntries(_ entries: [PortableEntry], replacing: Bool,
                              progress: (Int) -> Void = { _ in }) throws(ImportFailure) {
        var failing: VaultPath? = nil
        do {
            try writing(naming: .paths) { (store) throws(VaultError) in
                var logged: [AccessLogEntry] = []
                for (index, entry) in entries.enumerated() {
                    failing = entry.path
                    switch entry.kind {
                    case .item:
                        try importItem(entry, replacing: replacing, logging: &logged, in: store)
                    case .dictionary:
                        try importDictionary(entry, replacing: replacing, logging: &logged, in: store)
                    }
                    progress(index + 1)
                }
                failing = nil
                // In the same transaction, as `allow` and `class` do: rules and classes never change without their entries.
                if !logged.isEmpty { try appendAccessLog(logged, in: store) }
            }
        } catch {
            throw ImportFailure(entry: failing, error: error)
        }
    }

    private func importItem(_ entry: PortableEntry, replacing: Bool, logging logged: inout [AccessLogEntry],
                            in store: NodeStore) throws(VaultError) {
        switch entry.content {
        case .some(let content): try importItem(entry, content: content, replacing: replacing, logging: &logged, in: store)
        case .none: try importItem(entry, content: try SecureBuffer(capacity: 0), replacing: replacing, logging: &logged, in: store)
        }
    }

    private func importItem(_ entry: PortableEntry, content: borrowing SecureBuffer, replacing: Bool,
                            logging logged: inout [AccessLogEntry], in store: NodeStore) throws(VaultError) {
        guard let name = entry.path.lastComponent else { throw .invalidArgument("the path names the root dictionary") }
        try checkItemSize(content.count)
        let parent = try dictionary(at: entry.path.parent, creating: true, in: store)
        let record: NodeRecord
        var replaced = false
        if let existing = try store.child(named: name, in: parent.id) {
            guard existing.kind == .item else { throw .isADictionary(entry.path.description) }
            guard replacing else { throw .alreadyExists(entry.path.description + " (give --replace to replace it)") }
            var target = existing
            if let accessibility = entry.accessibility, accessibility != existing.attributes.accessibility {
                // The new content is sealed under the new class's key; the old is never opened.
                var changed = existing.attributes
                changed.accessibility = accessibility
                target = NodeRecord(place: existing.place, parent: existing.parent, attributes: changed)
                if accessibility == .afterFirstUnlock { try store.resealAncestorsInCurrentLayout(from: parent.id) }
                logged.append(Vault.ownChange(.classChange, at: entry.path))
            }
            _ = try store.writeContent(content, of: target, modified: .now())
            record = try store.existingRecord(existing.id)
            replaced = true
        } else {
            let node = try store.insertItem(named: name, in: parent, mode: 0o600, content: content, accessibility: entry.accessibility)
            record = try store.existingRecord(node.id)
        }
        var set = try Vault.copies(entry.attributes)
        var removing: [AttributeName] = []
        try Vault.propertyChange(.label, entry.label, set: &set, removing: &removing)
        try Vault.propertyChange(.contentType, entry.contentType, set: &set, removing: &removing)
        try store.changeAttributes(of: record, set: set, removing: removing, replacingUserAttributes: true)
        _ = try store.attributesChanged(of: try store.existingRecord(record.id), at: .now())
        let rules = entry.rules
        // Each rule change reads and seals every rule again: only when there is one to make.
        if replaced || !rules.isEmpty {
            try store.changeRules(of: try store.existingRecord(record.id)) { _ in rules }
            logged.append(Vault.ownChange(.ruleChange, at: entry.path))
        }
    }

    private func importDictionary(_ entry: PortableEntry, replacing: Bool, logging logged: inout [AccessLogEntry],
                                  in store: NodeStore) throws(VaultError) {
        var record = try dictionary(at: entry.path, creating: true, in: store)
        var set: [Attribute] = []
        var removing: [AttributeName] = []
        let ownAttributes = try store.attributes(of: record)
        if replacing || ownAttributes.isEmpty { set = try Vault.copies(entry.attributes) }
        let hasLabel = Vault.isSet(try store.attributeValue(ItemProperty.label.storedName, of: record))
        if replacing || !hasLabel {
            try Vault.propertyChange(.label, entry.label, set: &set, removing: &removing)
        }
        if !set.isEmpty || !removing.isEmpty || (replacing && !ownAttributes.isEmpty) {
            try store.changeAttributes(of: record, set: set, removing: removing,
                                       replacingUserAttributes: replacing || ownAttributes.isEmpty)
            record = try store.existingRecord(record.id)
            _ = try store.attributesChanged(of: record, at: .now())
            record = try store.existingRecord(record.id)
        }
        if (replacing || record.attributes.defaultClass == nil) && entry.accessibility != record.attributes.defaultClass {
            _ = try store.changeDefaultClass(of: record, to: entry.accessibility, at: .now())
            record = try store.existingRecord(record.id)
            logged.append(Vault.ownChange(.classChange, at: entry.path))
        }
        let rules = entry.rules
        guard replacing || !rules.isEmpty else { return }
        var changed = false
        try store.changeRules(of: record) { (current) throws(VaultError) -> [AccessRule] in
            changed = replacing || current.isEmpty
            return changed ? rules : current
        }
        if changed { logged.append(Vault.ownChange(.ruleChange, at: entry.path)) }
    }

    private static func isSet(_ value: consuming SecureBuffer?) -> Bool {
        switch consume value {
        case .some: true
        case .none: false
        }
    }

    /// Attributes to store, copied: the entry keeps its own.
    private static func copies(_ attributes: [Attribute]) throws(VaultError) -> [Attribute] {
        var copied: [Attribute] = []
        for attribute in attributes {
            let value = try attribute.value.withUnsafeBytes { (bytes) throws(VaultError) in try SecureBuffer(copying: bytes) }
            copied.append(Attribute(name: attribute.name, value: value))
        }
        return copied
    }
}
