import VaultStorageKit

/// The node rows (and the vault's row) one connection read or wrote, kept between
/// transactions, all true at one value of the vault's `change_count`: what lets a lookup or a
/// write's reads be answered without asking the server again. Only ciphertext, tags and ids are
/// held (what the server holds too). A node known not to exist is kept as nil, by id and by
/// name (parent and tag), so a lookup that found nothing is not asked again either.
///
/// Whether they may be used is `PostgresStorage`'s business (the count read with every query,
/// the notices of other sessions' commits); this type only keeps them consistent with each
/// other: a node moved or removed leaves its old name known to be free.
struct PostgresKnownRows {
    /// The change count they are true at; nil when nothing is known.
    private(set) var count: Int64?
    /// The vault's row as `PostgresStorage.vaultColumns` lists it.
    var vault: [PGValue]?
    /// Every node's sealed access rules, by node, when known.
    var rules: [Int64: [UInt8]]?
    private var nodes: [Int64: NodeRow?] = [:]
    private var names: [Name: Int64?] = [:]
    /// Items' sealed contents, by id, up to `contentCapacity` bytes in all.
    private var contents: [Int64: [UInt8]] = [:]
    private var contentBytes = 0
    static let contentCapacity = 8 << 20
    /// Folders whose every entry is known (listed, or made here): a name not known in one is free.
    private var complete: Set<Int64> = []
    /// How many entries each folder has among `names`.
    private var entries: [Int64: Int] = [:]

    private struct Name: Hashable {
        let parent: Int64
        let tag: [UInt8]
    }

    /// Rows past this many are dropped (all of them, at once): a vault's working set is its
    /// open folders, and a bound keeps a mount of a large vault from holding every row.
    static let capacity = 20_000

    /// Starts over at `count`: what was known is forgotten.
    mutating func restart(at count: Int64?) {
        self.count = count
        vault = nil
        rules = nil
        forgetNodes()
    }

    /// Moves to `count` with every row kept: the caller knows nothing else changed meanwhile.
    mutating func advance(to count: Int64) { self.count = count }

    /// What is known of node `id`: nil when nothing is, `.some(nil)` when it does not exist.
    func node(_ id: NodeID) -> NodeRow?? { nodes[id.rawValue] }

    /// What is known of the name `tag` in `parent`, as `node(_:)` says it.
    func node(in parent: NodeID, nameTag: [UInt8]) -> NodeRow?? {
        guard let entry = names[Name(parent: parent.rawValue, tag: nameTag)] else {
            return complete.contains(parent.rawValue) ? .some(nil) : nil
        }
        guard let id = entry else { return .some(nil) }
        return nodes[id] ?? nil
    }

    /// Notes `node` as node `id` now is (nil: gone); its old name, if known, is free now.
    mutating func note(_ id: NodeID, _ node: NodeRow?) {
        if nodes.count + names.count + complete.count > PostgresKnownRows.capacity {
            let kept = count
            restart(at: kept)
        }
        if case .some(.some(let before)) = nodes[id.rawValue] {
            setName(Name(parent: before.parent.rawValue, tag: before.nameTag), nil)
        }
        nodes[id.rawValue] = .some(node)
        if node == nil { noteContent(id, nil) }
        // The root is its own parent: no name of it to note.
        if let node, node.id != node.parent {
            setName(Name(parent: node.parent.rawValue, tag: node.nameTag), node.id.rawValue)
        }
    }

    /// The sealed content of item `id`, when known.
    func content(of id: NodeID) -> [UInt8]? { contents[id.rawValue] }

    /// Notes `sealed` as item `id`'s content (nil: not known); past the capacity, none is kept.
    mutating func noteContent(_ id: NodeID, _ sealed: [UInt8]?) {
        if let old = contents.removeValue(forKey: id.rawValue) { contentBytes -= old.count }
        guard let sealed else { return }
        if contentBytes + sealed.count > PostgresKnownRows.contentCapacity {
            contents = [:]
            contentBytes = 0
            guard sealed.count <= PostgresKnownRows.contentCapacity else { return }
        }
        contents[id.rawValue] = sealed
        contentBytes += sealed.count
    }

    /// Notes that nothing is named `tag` in `parent`.
    mutating func noteAbsent(in parent: NodeID, nameTag: [UInt8]) {
        setName(Name(parent: parent.rawValue, tag: nameTag), nil)
    }

    /// Names `id` by `name` (nil: free), keeping each folder's count of known entries.
    private mutating func setName(_ name: Name, _ id: Int64?) {
        let before: Int64?? = names.updateValue(id, forKey: name)
        let named = before.map { $0 != nil } ?? false
        let change = (id == nil ? 0 : 1) - (named ? 1 : 0)
        if change != 0 { entries[name.parent, default: 0] += change }
    }

    /// Whether `folder` has entries, when it is known whole.
    func hasEntries(_ folder: NodeID) -> Bool? {
        complete.contains(folder.rawValue) ? entries[folder.rawValue, default: 0] > 0 : nil
    }

    /// Notes that every entry of `folder` is known (each noted by `note`).
    mutating func noteComplete(_ folder: NodeID) {
        complete.insert(folder.rawValue)
    }

    /// Forgets the nodes (a subtree's removal names none of them), keeping the vault's row.
    mutating func forgetNodes() {
        nodes = [:]
        names = [:]
        entries = [:]
        complete = []
        contents = [:]
        contentBytes = 0
    }
}
