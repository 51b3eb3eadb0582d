/// A record that failed `verify`.
public struct IntegrityProblem: Sendable, CustomStringConvertible {
    public let path: String
    public let reason: String
    public var description: String { "\(path): \(reason)" }
}

extension Vault {
    /// Decrypts and authenticates every record, and checks that each sits where it claims to
    /// (its tag, its parent, its dictionary's entry count). Returns every failure found; an
    /// empty list means all is well.
    public func verify() throws(VaultError) -> [IntegrityProblem] {
        try reading { (store) throws(VaultError) -> [IntegrityProblem] in
            var problems: [IntegrityProblem] = []
            func report(_ id: NodeID, _ reason: String) {
                problems.append(IntegrityProblem(path: store.describe(id), reason: reason))
            }
            var kinds: [Int64: Int64] = [:]
            var entryCounts: [Int64: Int] = [:]
            try store.db.query("SELECT id, parent, kind FROM nodes") { (row) throws(VaultError) in
                guard let id = row[0].integer, let parent = row[1].integer, let kind = row[2].integer else { return }
                kinds[id] = kind
                if id != NodeID.root.rawValue { entryCounts[parent, default: 0] += 1 }
            }
            if kinds[NodeID.root.rawValue] != NodeKind.dictionary.rawValue {
                problems.append(IntegrityProblem(path: "/", reason: "the root dictionary is missing"))
            }
            if let next = try store.db.row("SELECT next_node_id FROM vault")?.first?.integer, let highest = kinds.keys.max(), next <= highest {
                problems.append(IntegrityProblem(path: "/", reason: "the node counter was moved back"))
            }
            let rows = try store.db.rows("SELECT id, parent, kind, incarnation, name_tag, name, attributes, content IS NOT NULL FROM nodes ORDER BY id")
            for row in rows {
                guard let rawID = row[0].integer, let rawParent = row[1].integer, let rawKind = row[2].integer,
                      let incarnation = row[3].blob, let tag = row[4].blob, let sealedName = row[5].blob,
                      let sealedAttributes = row[6].blob, let hasContent = row[7].integer else {
                    problems.append(IntegrityProblem(path: "<record \(row[0].integer ?? -1)>", reason: "malformed row"))
                    continue
                }
                let place = RecordPlace(node: NodeID(rawID), incarnation: incarnation)
                let parent = NodeID(rawParent)
                if place.node != .root {
                    if kinds[parent.rawValue] != NodeKind.dictionary.rawValue { report(place.node, "its dictionary is missing") }
                    if let name = store.cipher.openName(sealedName, place, parent: parent) {
                        if store.cipher.tag(for: name, in: parent) != tag { report(place.node, "its lookup tag does not match its name") }
                    } else {
                        report(place.node, "name failed authentication")
                    }
                }
                guard let attributes = store.cipher.openAttributes(sealedAttributes, place), attributes.kind.rawValue == rawKind else {
                    report(place.node, "attributes failed authentication")
                    continue
                }
                let record = NodeRecord(place: place, parent: parent, attributes: attributes)
                switch attributes.kind {
                case .item:
                    guard hasContent == 1 else { report(place.node, "content is missing"); continue }
                    do throws(VaultError) {
                        _ = try store.content(of: record)
                    } catch .integrityFailure {
                        report(place.node, "content failed authentication")
                    }
                case .dictionary:
                    if hasContent == 1 { report(place.node, "a dictionary with content") }
                    let found = entryCounts[rawID, default: 0]
                    if found != attributes.size {
                        report(place.node, "\(attributes.size) entries recorded but \(found) found (entries deleted or added)")
                    }
                }
            }
            return problems
        }
    }
}
