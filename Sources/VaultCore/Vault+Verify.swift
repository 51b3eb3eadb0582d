/// A record that failed `verify`.
public struct IntegrityProblem: Sendable, CustomStringConvertible {
    public let path: String
    public let reason: String
    public var description: String { "\(path): \(reason)" }

    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }
}

extension Vault {
    /// Decrypts and authenticates every record, and checks that each sits where it claims to
    /// (its tag, its parent, its dictionary's entry and subdictionary counts). Returns every failure found; an
    /// empty list means all is well. `progress` is told of each record as it is checked
    /// (its number and the number of records).
    public func verify(progress: (_ done: Int, _ total: Int) -> Void = { _, _ in }) throws(VaultError) -> [IntegrityProblem] {
        let heads = seenLogHeads()
        let seen = heads?.recorded
        return try reading(naming: .paths) { (store) throws(VaultError) -> [IntegrityProblem] in
            var problems: [IntegrityProblem] = []
            func report(_ id: NodeID, _ reason: String) {
                problems.append(IntegrityProblem(path: store.describe(id), reason: reason))
            }
            let nodes = try store.storage.everyNode()
            var kinds: [Int64: Int64] = [:]
            var entryCounts: [Int64: Int] = [:]
            var subdictionaryCounts: [Int64: Int] = [:]
            for case .row(let row, _) in nodes {
                kinds[row.id.rawValue] = row.kind
                guard row.id != .root else { continue }
                entryCounts[row.parent.rawValue, default: 0] += 1
                if row.kind == NodeKind.dictionary.rawValue { subdictionaryCounts[row.parent.rawValue, default: 0] += 1 }
            }
            if kinds[NodeID.root.rawValue] != NodeKind.dictionary.rawValue {
                problems.append(IntegrityProblem(path: "/", reason: "the root dictionary is missing"))
            }
            if let next = try store.storage.nextNodeID(), let highest = kinds.keys.max(), next.rawValue <= highest {
                problems.append(IntegrityProblem(path: "/", reason: "the node counter was moved back"))
            }
            if try store.hasCheckableState {
                do throws(VaultError) { _ = try store.checkedState() } catch .integrityFailure(let what) {
                    problems.append(IntegrityProblem(path: "/", reason: what))
                }
            }
            for (index, node) in nodes.enumerated() {
                progress(index + 1, nodes.count)
                guard case .row(let row, let hasContent) = node else {
                    guard case .malformed(let id) = node else { continue }
                    problems.append(IntegrityProblem(path: "<record \(id ?? -1)>", reason: "malformed row"))
                    continue
                }
                let place = RecordPlace(node: row.id, incarnation: row.incarnation)
                let parent = row.parent
                if place.node != .root {
                    if kinds[parent.rawValue] != NodeKind.dictionary.rawValue { report(place.node, "its dictionary is missing") }
                    if let name = store.cipher.openName(row.sealedName, place, parent: parent) {
                        if store.cipher.tag(for: name, in: parent) != row.nameTag { report(place.node, "its lookup tag does not match its name") }
                    } else {
                        report(place.node, "name failed authentication")
                    }
                }
                guard let attributes = try store.cipher.openAttributes(row.sealedAttributes, place), attributes.kind.rawValue == row.kind else {
                    report(place.node, "attributes failed authentication")
                    continue
                }
                let record = NodeRecord(place: place, parent: parent, attributes: attributes)
                switch attributes.kind {
                case .item:
                    if attributes.subdictionaries != 0 { report(place.node, "an item with subdictionaries") }
                    guard hasContent else { report(place.node, "content is missing"); continue }
                    do throws(VaultError) {
                        _ = try store.content(of: record)
                    } catch .integrityFailure {
                        report(place.node, "content failed authentication")
                    } catch .otherDevice {
                        report(place.node, "this-device-only content does not open with this machine's host key (sealed elsewhere, or damaged)")
                    }
                case .dictionary:
                    if hasContent { report(place.node, "a dictionary with content") }
                    let found = entryCounts[row.id.rawValue, default: 0]
                    if found != attributes.size {
                        report(place.node, "\(attributes.size) entries recorded but \(found) found (entries deleted or added)")
                    }
                    let foundDictionaries = subdictionaryCounts[row.id.rawValue, default: 0]
                    if foundDictionaries != attributes.subdictionaries {
                        report(place.node, "\(attributes.subdictionaries) subdictionaries recorded but \(foundDictionaries) found")
                    }
                }
            }
            // Blocks of no node: left by no removal (each takes its blocks), so put there by hand.
            let orphanBlocks = try store.storage.orphanContentBlockCount()
            if orphanBlocks > 0 {
                problems.append(IntegrityProblem(path: "/", reason: "\(orphanBlocks) content blocks belong to no item"))
            }
            problems += try verifyAttributes(store, nodes: nodes)
            problems += try verifyRules(store, nodes: nodes)
            problems += try verifyAccessLog(store, seen: seen, heads: heads)
            return problems
        }
    }

    /// Each attribute row: of an existing node, its name and value authentic for that node and
    /// its tag, its tags those of its name and value, and each node's total within the limit.
    private func verifyAttributes(_ store: NodeStore, nodes: [StoredNode]) throws(VaultError) -> [IntegrityProblem] {
        var problems: [IntegrityProblem] = []
        func report(_ id: NodeID, _ reason: String) {
            problems.append(IntegrityProblem(path: store.describe(id), reason: reason))
        }
        var places: [NodeID: RecordPlace] = [:]
        for case .row(let row, _) in nodes { places[row.id] = RecordPlace(node: row.id, incarnation: row.incarnation) }
        var totals: [NodeID: Int] = [:]
        for stored in try store.storage.everyAttribute() {
            guard case .row(let row) = stored else {
                guard case .malformed(let node) = stored else { continue }
                problems.append(IntegrityProblem(path: "<record \(node ?? -1)>", reason: "malformed attribute row"))
                continue
            }
            guard let place = places[row.node] else {
                problems.append(IntegrityProblem(path: "<record \(row.node.rawValue)>", reason: "an attribute of a node that does not exist"))
                continue
            }
            guard let name = store.cipher.openAttributeName(row.sealedName, place, tag: row.tag) else {
                report(row.node, "an attribute's name failed authentication")
                continue
            }
            let label = "attribute \"\(name.description)\""
            if store.cipher.attributeTag(for: name, of: row.node) != row.tag { report(row.node, "\(label): its tag does not match its name") }
            guard let value = try store.cipher.openAttributeValue(row.sealedValue, place, tag: row.tag) else {
                report(row.node, "\(label): value failed authentication")
                continue
            }
            if value.count > Vault.maximumAttributeValueBytes { report(row.node, "\(label): value over the limit") }
            if store.cipher.attributeSearchTag(name: name, value: value) != row.searchTag {
                report(row.node, "\(label): its search tag does not match its name and value")
            }
            totals[row.node, default: 0] += name.count + value.count
        }
        for (node, total) in totals where total > Vault.maximumAttributeBytesPerNode {
            report(node, "attributes of \(total) bytes, over the limit")
        }
        return problems
    }

    /// Each rule record: of an existing node, authentic for that node, well formed; and the MAC
    /// over all of them the one last written (none added, deleted or put back).
    private func verifyRules(_ store: NodeStore, nodes: [StoredNode]) throws(VaultError) -> [IntegrityProblem] {
        var problems: [IntegrityProblem] = []
        var places: [NodeID: RecordPlace] = [:]
        for case .row(let row, _) in nodes { places[row.id] = RecordPlace(node: row.id, incarnation: row.incarnation) }
        var rows: [(place: RecordPlace, sealed: [UInt8])] = []
        var complete = true
        do throws(VaultError) {
            for row in try store.storage.ruleRows() {
                guard let place = places[row.node] else {
                    problems.append(IntegrityProblem(path: "<record \(row.node.rawValue)>", reason: "access rules of a node that does not exist"))
                    complete = false
                    continue
                }
                rows.append((place, row.sealed))
                if try store.cipher.openRules(row.sealed, place) == nil {
                    problems.append(IntegrityProblem(path: store.describe(row.node), reason: "access rules failed authentication"))
                }
            }
        } catch .integrityFailure(let what) {
            return [IntegrityProblem(path: "/", reason: what)]
        }
        guard let stored = try store.storage.rulesMAC() else {
            problems.append(IntegrityProblem(path: "/", reason: "the MAC over the access rules is missing"))
            return problems
        }
        if complete, try !store.cipher.rulesMACMatches(stored, rows) {
            problems.append(IntegrityProblem(path: "/", reason: "the access rules are not the ones last written (a rule changed, added, deleted or put back)"))
        }
        return problems
    }
}
