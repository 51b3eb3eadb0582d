/// A record that failed `verify`.
public struct IntegrityProblem: Sendable, CustomStringConvertible {
    public let path: String
    public let reason: String
    public var description: String { "\(path): \(reason)" }
}

extension Vault {
    /// Decrypts and authenticates every record, and checks that each sits where it claims
    /// to (its tag, its parent). Returns every failure found; an empty list means all is well.
    public func verify() throws(VaultError) -> [IntegrityProblem] {
        try reading { (store) throws(VaultError) -> [IntegrityProblem] in
            var problems: [IntegrityProblem] = []
            func report(_ id: NodeID, _ reason: String) {
                problems.append(IntegrityProblem(path: store.describe(id), reason: reason))
            }
            var kinds: [Int64: NodeKind] = [:]
            try store.db.query("SELECT id, kind FROM nodes") { (row) throws(VaultError) in
                if let id = row[0].integer, let kind = row[1].integer.flatMap(NodeKind.init(rawValue:)) { kinds[id] = kind }
            }
            if kinds[NodeID.root.rawValue] != .dictionary {
                problems.append(IntegrityProblem(path: "/", reason: "the root dictionary is missing"))
            }
            let rows = try store.db.rows("SELECT id, parent, kind, name_tag, name, attributes, content IS NOT NULL FROM nodes ORDER BY id")
            for row in rows {
                guard let rawID = row[0].integer, let rawParent = row[1].integer, let rawKind = row[2].integer,
                      let tag = row[3].blob, let sealedName = row[4].blob, let sealedAttributes = row[5].blob,
                      let hasContent = row[6].integer else {
                    problems.append(IntegrityProblem(path: "<record \(row[0].integer ?? -1)>", reason: "malformed row"))
                    continue
                }
                let id = NodeID(rawID), parent = NodeID(rawParent)
                guard let kind = NodeKind(rawValue: rawKind) else { report(id, "unknown kind"); continue }
                let record = NodeRecord(id: id, parent: parent, kind: kind, sealedName: sealedName, sealedAttributes: sealedAttributes)
                if id != .root {
                    if kinds[parent.rawValue] != .dictionary { report(id, "its dictionary is missing") }
                    if let name = store.cipher.openName(sealedName, node: id, parent: parent) {
                        if store.cipher.tag(for: name, in: parent) != tag { report(id, "its lookup tag does not match its name") }
                    } else {
                        report(id, "name failed authentication")
                    }
                }
                guard let attributes = store.cipher.openAttributes(sealedAttributes, node: id), attributes.kind == kind else {
                    report(id, "attributes failed authentication")
                    continue
                }
                switch kind {
                case .item:
                    guard hasContent == 1 else { report(id, "content is missing"); continue }
                    do throws(VaultError) {
                        _ = try store.content(of: record, attributes: attributes)
                    } catch .integrityFailure {
                        report(id, "content failed authentication")
                    }
                case .dictionary:
                    if hasContent == 1 { report(id, "a dictionary with content") }
                }
            }
            return problems
        }
    }
}
