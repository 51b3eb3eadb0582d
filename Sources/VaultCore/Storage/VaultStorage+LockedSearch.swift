/// A search while locked, from what the storage gives without keys: which nodes hold rows of
/// given search tags, and the nodes table's clear columns (kind, parent). Nothing here is
/// authenticated (that takes keys a lock wiped), so what it answers are candidates.
extension VaultStorage {
    /// The nodes, by id ascending, holding a row of every one of `searchTags` (one indexed
    /// query per tag, intersected) whose row says it is an item, directly in `parent` when it
    /// is given.
    func itemCandidates(holdingEvery searchTags: [[UInt8]], in parent: NodeID?) throws(VaultError) -> [NodeID] {
        if let parent {
            let name = parent == .root ? "/" : "node \(parent)"
            guard let row = try node(parent) else { throw .notFound(name) }
            guard row.kind == NodeKind.dictionary.rawValue else { throw .notADictionary(name) }
        }
        var candidates: Set<NodeID>? = nil
        for tag in searchTags {
            let holders = Set(try attributes(withSearchTag: tag).map(\.node))
            let remaining = candidates.map { $0.intersection(holders) } ?? holders
            guard !remaining.isEmpty else { return [] }
            candidates = remaining
        }
        var found: [NodeID] = []
        for id in (candidates ?? []).sorted(by: { $0.rawValue < $1.rawValue }) {
            // An attribute row of a missing node is verify's to report, not a candidate.
            guard let row = try node(id), row.kind == NodeKind.item.rawValue else { continue }
            if let parent, row.parent != parent { continue }
            found.append(id)
        }
        return found
    }
}
