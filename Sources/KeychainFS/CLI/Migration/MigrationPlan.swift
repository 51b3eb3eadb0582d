import Support
import VaultCore

/// What a migration stores: every incoming item the vault does not have yet (by
/// `ItemIdentity`, against the items of its dictionary), named after its label and made
/// unique there as the Secret Service names a new item (" 2", " 3", ...). Matched items are
/// left alone, or with `replacing` stored again under the name they have.
struct MigrationPlan {
    private(set) var entries: [PortableEntry] = []
    /// The vault paths of the items that would be stored, in order; names only, no secrets.
    private(set) var paths: [VaultPath] = []
    private(set) var alreadyThere = 0

    private struct Dictionary {
        var exists = false
        var names: Set<ItemName> = []
        /// Existing items by identity: each matches at most one incoming item, so that two
        /// items alike at the source stay two here.
        var existing: [ItemIdentity: [ItemName]] = [:]
    }

    init(_ dictionaries: [IncomingDictionary], vault: Vault, replacing: Bool) throws(VaultError) {
        let key = try ItemIdentity.Key()
        var known: [VaultPath: Dictionary] = [:]
        // A group's dictionary takes its name in its parent before any item there can: an item
        // "Email" beside the group "Email" becomes "Email 2".
        var dictionaryNames: [VaultPath: Set<ItemName>] = [:]
        for incoming in dictionaries where !incoming.items.isEmpty {
            var path = incoming.path
            while let last = path.lastComponent {
                path = path.parent
                dictionaryNames[path, default: []].insert(last)
            }
        }
        for incoming in dictionaries {
            // An empty collection (gnome-keyring's in-memory "session") makes no dictionary.
            if incoming.items.isEmpty { continue }
            if known[incoming.path] == nil {
                var read = try Self.read(incoming.path, vault: vault, key: key)
                read.names.formUnion(dictionaryNames[incoming.path] ?? [])
                known[incoming.path] = read
                // Only a new one: an import naming an existing dictionary (with --replace) would
                // reset its attributes, label and rules.
                if !read.exists { entries.append(PortableEntry(dictionary: incoming.path, label: try SecureBuffer.copy(incoming.label))) }
            }
            var state = known[incoming.path]!
            for item in incoming.items {
                let identity = item.label.withUnsafeBytes { ItemIdentity(label: $0, attributes: item.attributes, key: key) }
                let name: ItemName
                if var matches = state.existing[identity], !matches.isEmpty {
                    let existingName = matches.removeFirst()
                    state.existing[identity] = matches
                    alreadyThere += 1
                    guard replacing else { continue }
                    name = existingName
                } else {
                    name = try Self.unusedName(fromLabel: item.label, in: &state.names)
                }
                let path = incoming.path.appending(name)
                paths.append(path)
                switch item.content.take() {
                case .some(let content):
                    entries.append(PortableEntry(item: path, content: content, attributes: item.attributes,
                                                 label: try item.label.copy(), contentType: item.contentType.take()))
                case .none:
                    break
                }
            }
            known[incoming.path] = state
        }
    }

    /// The names and identities of the items already in the dictionary at `path` (none when it
    /// does not exist yet).
    private static func read(_ path: VaultPath, vault: Vault, key: ItemIdentity.Key) throws(VaultError) -> Dictionary {
        var dictionary = Dictionary()
        let entries: [DirectoryEntry]
        do {
            entries = try vault.list(path)
        } catch .notFound {
            return dictionary
        }
        dictionary.exists = true
        for entry in entries {
            dictionary.names.insert(entry.name)
            guard entry.node.kind == .item else { continue }
            let attributes = try vault.attributes(of: entry.node.id)
            let identity: ItemIdentity
            switch try vault.property(.label, of: entry.node.id) {
            case .some(let label): identity = label.withUnsafeBytes { ItemIdentity(label: $0, attributes: attributes, key: key) }
            case .none: identity = ItemIdentity(label: UnsafeRawBufferPointer(start: nil, count: 0), attributes: attributes, key: key)
            }
            dictionary.existing[identity, default: []].append(entry.name)
        }
        return dictionary
    }

    private static func unusedName(fromLabel label: borrowing SecureBuffer, in names: inout Set<ItemName>) throws(VaultError) -> ItemName {
        let base = try ItemName.base(fromLabel: label)
        var number = 1
        while true {
            let candidate = try ItemName(base: base, number: number)
            if names.insert(candidate).inserted { return candidate }
            number += 1
        }
    }
}
