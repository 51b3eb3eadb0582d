import Support
import VaultCore

/// What a migration stores: every incoming item the vault does not have yet (by
/// `ItemIdentity`, against the items of its dictionary), named after its label and made
/// unique there as the Secret Service names a new item (" 2", " 3", ...). Matched items are
/// left alone, or with `replacing` stored again under the name they have.
///
/// Stored in transactions of `batchSize` items, each item read with its secret just before:
/// one transaction for everything would need every secret in locked memory at once. A failure
/// stops at its batch; the batches before it stay, and a second run imports the rest (it
/// finds the stored ones already here). A malformed source fails before anything is stored.
struct MigrationPlan {
    static let batchSize = 100

    private struct Planned {
        let dictionary: Int
        let index: Int
        let path: VaultPath
    }

    private var planned: [Planned] = []
    /// Dictionaries to make, with their labels: only new ones (an existing dictionary given to
    /// an import with --replace would lose its attributes, label and rules).
    private var newDictionaries: [Int] = []
    private(set) var alreadyThere = 0

    /// The vault paths of the items that would be stored, in order; names only, no secrets.
    var paths: [VaultPath] { planned.map(\.path) }

    private struct Dictionary {
        var names: Set<ItemName> = []
        /// Existing items by identity: each matches at most one incoming item, so that two
        /// items alike at the source stay two here.
        var existing: [ItemIdentity: [ItemName]] = [:]
    }

    init(_ source: some IncomingSource, vault: Vault, replacing: Bool) throws(CommandFailure) {
        let key = try CommandFailure.vault { () throws(VaultError) in try ItemIdentity.Key() }
        let dictionaries = source.dictionaries
        // A group's dictionary takes its name in its parent before any item there can: an item
        // "Email" beside the group "Email" becomes "Email 2".
        var dictionaryNames: [VaultPath: Set<ItemName>] = [:]
        for incoming in dictionaries where incoming.count > 0 {
            var path = incoming.path
            while let last = path.lastComponent {
                path = path.parent
                dictionaryNames[path, default: []].insert(last)
            }
        }
        var known: [VaultPath: Dictionary] = [:]
        for (number, incoming) in dictionaries.enumerated() where incoming.count > 0 {
            if known[incoming.path] == nil {
                var (read, exists) = try CommandFailure.vault { () throws(VaultError) in try Self.read(incoming.path, vault: vault, key: key) }
                read.names.formUnion(dictionaryNames[incoming.path] ?? [])
                known[incoming.path] = read
                if !exists { newDictionaries.append(number) }
            }
            var state = known[incoming.path]!
            for index in 0..<incoming.count {
                let item = try source.item(in: number, at: index, secrets: false)
                let identity = item.label.withUnsafeBytes { ItemIdentity(label: $0, attributes: item.attributes, key: key) }
                let name: ItemName
                if var matches = state.existing[identity], !matches.isEmpty {
                    let existingName = matches.removeFirst()
                    state.existing[identity] = matches
                    alreadyThere += 1
                    guard replacing else { continue }
                    name = existingName
                } else {
                    name = try CommandFailure.vault { () throws(VaultError) in try Self.unusedName(fromLabel: item.label, in: &state.names) }
                }
                planned.append(Planned(dictionary: number, index: index, path: incoming.path.appending(name)))
            }
            known[incoming.path] = state
        }
    }

    /// A dry run lists the paths; a run stores them. Either way, says how many items were
    /// found already imported.
    func finish(dryRun: Bool, from source: some IncomingSource, vault: Vault, replacing: Bool) throws(CommandFailure) {
        if dryRun {
            Terminal.writeAll(1, paths.map { Terminal.printable($0.description) + "\n" }.joined())
            Terminal.printInfo("\(paths.count) item\(paths.count == 1 ? "" : "s") would be imported; \(alreadyThere) already here")
            return
        }
        let stored = try store(from: source, vault: vault, replacing: replacing)
        Terminal.printInfo("imported \(stored) item\(stored == 1 ? "" : "s")")
        if alreadyThere > 0 {
            Terminal.printInfo("\(alreadyThere) item\(alreadyThere == 1 ? " was" : "s were") already here" + (replacing ? " and stored again" : "; left as they are"))
        }
    }

    private func store(from source: some IncomingSource, vault: Vault, replacing: Bool) throws(CommandFailure) -> Int {
        var bar = ProgressBar("import", total: planned.count)
        defer { bar.finish() }
        var entries: [PortableEntry] = []
        for number in newDictionaries {
            let dictionary = source.dictionaries[number]
            entries.append(try CommandFailure.vault { () throws(VaultError) in
                PortableEntry(dictionary: dictionary.path, label: try SecureBuffer.copy(dictionary.label))
            })
        }
        var stored = 0
        var start = 0
        while start < planned.count || !entries.isEmpty {
            let batch = planned[start..<min(start + Self.batchSize, planned.count)]
            for step in batch {
                let item = try source.item(in: step.dictionary, at: step.index, secrets: true)
                let entry = try CommandFailure.vault { () throws(VaultError) -> PortableEntry in
                    let content: SecureBuffer
                    switch item.content.take() {
                    case .some(let taken): content = taken
                    case .none: content = try SecureBuffer(capacity: 0)
                    }
                    return PortableEntry(item: step.path, content: content, attributes: item.attributes, label: try item.label.copy(),
                                         contentType: item.contentType.take())
                }
                entries.append(entry)
            }
            do {
                try vault.importEntries(entries, replacing: replacing) { bar.update(stored + $0) }
            } catch {
                guard stored > 0 else { throw CommandFailure(message: error.description, status: ExitStatus.code(for: error.error)) }
                let place = error.entry.map { " at " + Terminal.printable($0.description) } ?? ""
                throw CommandFailure(message: "import failed\(place): \(error.error); the \(stored) items before its batch are stored, "
                                     + "and a second run imports the rest (it does not import them twice)",
                                     status: ExitStatus.code(for: error.error))
            }
            stored += batch.count
            entries = []
            start += Self.batchSize
        }
        return stored
    }

    /// The names and identities of the items already in the dictionary at `path` (none, and
    /// not existing, when it is not there yet).
    private static func read(_ path: VaultPath, vault: Vault, key: ItemIdentity.Key) throws(VaultError) -> (Dictionary, exists: Bool) {
        var dictionary = Dictionary()
        let entries: [DirectoryEntry]
        do {
            entries = try vault.list(path)
        } catch .notFound {
            return (dictionary, false)
        }
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
        return (dictionary, true)
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
