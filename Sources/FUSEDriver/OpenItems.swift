import VaultCore

/// The open descriptors by handle, and the one shared OpenItem of each node they are open on.
struct OpenItems {
    private var files: [UInt64: OpenFile] = [:]
    /// The OpenItem a new open of the node shares. An item retired as stale (changed while the
    /// vault was locked) is left out, reachable only through the descriptors already on it.
    private var current: [NodeID: OpenItem] = [:]

    func file(_ handle: UInt64) -> OpenFile? { files[handle] }

    /// The OpenItem new descriptors of `id` share, if any is open.
    func item(_ id: NodeID) -> OpenItem? { current[id] }

    /// Every OpenItem with descriptors, stale ones included.
    var items: [OpenItem] {
        var seen = Set<ObjectIdentifier>()
        return files.values.map(\.item).filter { seen.insert(ObjectIdentifier($0)).inserted }
    }

    func descriptors(of item: OpenItem) -> [OpenFile] {
        files.values.filter { $0.item === item }
    }

    var isEmpty: Bool { files.isEmpty }

    mutating func add(_ file: OpenFile, handle: UInt64) {
        files[handle] = file
        file.item.descriptors += 1
        if !file.item.stale { current[file.id] = file.item }
    }

    /// Removes a descriptor; the last one of an item takes the item (and its plaintext) along.
    mutating func remove(_ handle: UInt64) -> OpenFile? {
        guard let file = files.removeValue(forKey: handle) else { return nil }
        let item = file.item
        item.descriptors -= 1
        if item.descriptors == 0 {
            if current[item.id] === item { current[item.id] = nil }
            item.wipeContent()
        }
        return file
    }

    /// New opens of the node get a fresh OpenItem from now on.
    mutating func retire(_ item: OpenItem) {
        item.stale = true
        if current[item.id] === item { current[item.id] = nil }
    }

    /// Forgets every descriptor and wipes every item (unmount).
    mutating func removeAll() {
        for item in items { item.wipeContent() }
        files.removeAll()
        current.removeAll()
    }
}
