/// Seals every record of a vault again under a new master key, inside the caller's `write`,
/// so the vault is rotated completely or not at all. Walks the records as `FormatUpgrade` and
/// `verify` do, but refuses what fails authentication instead of leaving it: a record left
/// under the old key would stay readable to whoever the rotation is meant to shut out (and
/// would fail under the new one), so a damaged vault is verified and repaired first.
///
/// The vault id stays, so nothing outside the records (mounts' node ids, the access log's
/// sequences) changes meaning. Key slots are the caller's business (`Vault.removeMember`).
struct KeyRotation {
    let storage: any VaultStorage
    let old: RecordCipher
    let new: RecordCipher

    /// How many records were sealed again, by kind.
    struct Counts: Sendable {
        var nodes = 0
        var contents = 0
        var attributes = 0
        var rules = 0
        var accessLogBatches = 0

        var total: Int { nodes + contents + attributes + rules + accessLogBatches }
    }

    init(storage: any VaultStorage, old: RecordCipher, new: RecordCipher) {
        precondition(old.vaultID == new.vaultID, "a rotation keeps the vault id")
        self.storage = storage
        self.old = old
        self.new = new
    }

    func resealEverything() throws(VaultError) -> Counts {
        var counts = Counts()
        // First, under the write lock: a header sealed with another key means another rotation
        // committed since the caller's look, and nothing else would open either.
        let header = try checkedHeader()
        let places = try resealNodes(&counts)
        try resealAttributes(places, &counts)
        try resealRules(places, &counts)
        try resealAccessLog(&counts)
        try storage.updateHeaderMAC(new.headerMAC(itemSizeLimit: header.itemSizeLimit, oldestFormat: header.sealedAs))
        return counts
    }

    /// `what` names the record; the error's message says it failed authentication.
    private func refused(_ what: String) -> VaultError {
        .integrityFailure("\(what) (so the master key was not rotated; `keychainfs verify` lists what is damaged)")
    }

    /// Names get new tags (keyed hashes under the new tag key) and boxes; contents keep their
    /// class and generation. Gives every node's place, for the records bound to it.
    private func resealNodes(_ counts: inout Counts) throws(VaultError) -> [NodeID: RecordPlace] {
        var places: [NodeID: RecordPlace] = [:]
        for stored in try storage.everyNode() {
            guard case .row(let row, let hasContent) = stored else { throw refused("a node row (malformed)") }
            let place = RecordPlace(node: row.id, incarnation: row.incarnation)
            places[row.id] = place
            guard let attributes = try old.openAttributes(row.sealedAttributes, place), attributes.kind.rawValue == row.kind else {
                throw refused("record \(row.id.rawValue): attributes")
            }
            let sealedAttributes = new.sealAttributes(attributes, place)
            if row.id == .root {
                try storage.updateAttributes(of: row.id, sealedAttributes: sealedAttributes)
            } else {
                guard let name = old.openName(row.sealedName, place, parent: row.parent),
                      old.tag(for: name, in: row.parent) == row.nameTag else {
                    throw refused("record \(row.id.rawValue): name")
                }
                try storage.relink(row.id, to: row.parent, nameTag: new.tag(for: name, in: row.parent),
                                   sealedName: new.sealName(name, place, parent: row.parent), sealedAttributes: sealedAttributes)
            }
            counts.nodes += 1
            guard attributes.kind == .item else { continue }
            guard hasContent, let sealed = try storage.sealedContent(of: row.id) else { throw refused("record \(row.id.rawValue): content") }
            let resealed: [UInt8]
            if NodeStore.isBlocked(attributes.size),
               let map = try old.openBlockMap(sealed, place, contentGeneration: attributes.contentGeneration, size: attributes.size,
                                              accessibility: attributes.accessibility) {
                try resealBlocks(of: row.id, place, attributes, map)
                resealed = try new.sealBlockMap(map, place, contentGeneration: attributes.contentGeneration,
                                                accessibility: attributes.accessibility)
            } else {
                guard let content = try old.openContent(sealed, place, generation: attributes.contentGeneration,
                                                        expectedCount: attributes.size, accessibility: attributes.accessibility) else {
                    throw refused("record \(row.id.rawValue): content")
                }
                resealed = try new.sealContent(content, place, generation: attributes.contentGeneration,
                                               accessibility: attributes.accessibility)
            }
            try storage.updateAttributesAndContent(of: row.id, sealedAttributes: sealedAttributes, sealedContent: resealed)
            counts.contents += 1
        }
        return places
    }

    /// Each block of a large item under the new keys, at the generation its map gives it; a
    /// block the map names but the rows lack, or one that fails, refuses the rotation.
    private func resealBlocks(of id: NodeID, _ place: RecordPlace, _ attributes: NodeAttributes, _ map: BlockMap) throws(VaultError) {
        let rows = try storage.contentBlocks(of: id, in: 0..<map.generations.count)
        var resealed = 0
        for row in rows {
            let generation = map.generation(of: row.index)
            guard generation != 0 else { continue }
            var block = try SecureBuffer(capacity: VaultFormat.contentBlockBytes)
            guard try old.openBlock(row.sealed, index: row.index, place, generation: generation,
                                    accessibility: attributes.accessibility, into: &block) else {
                throw refused("record \(id.rawValue): content block \(row.index)")
            }
            try storage.upsertContentBlock(ContentBlockRow(index: row.index, sealed: new.sealBlock(
                block, index: row.index, place, generation: generation, accessibility: attributes.accessibility)), of: id)
            resealed += 1
        }
        guard resealed == map.generations.filter({ $0 != 0 }).count else { throw refused("record \(id.rawValue): a content block") }
    }

    /// Both tags change with the keys, so each row is replaced under its new tag.
    private func resealAttributes(_ places: [NodeID: RecordPlace], _ counts: inout Counts) throws(VaultError) {
        for stored in try storage.everyAttribute() {
            guard case .row(let row) = stored, let place = places[row.node] else { throw refused("an attribute row (malformed)") }
            guard let name = old.openAttributeName(row.sealedName, place, tag: row.tag),
                  old.attributeTag(for: name, of: row.node) == row.tag,
                  let value = try old.openAttributeValue(row.sealedValue, place, tag: row.tag) else {
                throw refused("record \(row.node.rawValue): an attribute")
            }
            let tag = new.attributeTag(for: name, of: row.node)
            let resealed = AttributeRow(node: row.node, tag: tag, searchTag: new.attributeSearchTag(name: name, value: value),
                                        sealedName: new.sealAttributeName(name, place, tag: tag),
                                        sealedValue: try new.sealAttributeValue(value, place, tag: tag))
            try storage.deleteAttribute(of: row.node, tag: row.tag)
            try storage.upsertAttribute(resealed)
            counts.attributes += 1
        }
    }

    /// Each record, then the MAC over all of them under the new rules key; the old MAC is
    /// checked first, so a rule deleted or put back outside keychainfs is not sealed as genuine.
    private func resealRules(_ places: [NodeID: RecordPlace], _ counts: inout Counts) throws(VaultError) {
        var oldRows: [(place: RecordPlace, sealed: [UInt8])] = []
        var newRows: [(place: RecordPlace, sealed: [UInt8])] = []
        for row in try storage.ruleRows() {
            guard let place = places[row.node], let rules = try old.openRules(row.sealed, place) else {
                throw refused("the access rules of record \(row.node.rawValue)")
            }
            let sealed = try new.sealRules(rules, place)
            oldRows.append((place, row.sealed))
            newRows.append((place, sealed))
            try storage.upsertRule(RuleRow(node: row.node, sealed: sealed))
            counts.rules += 1
        }
        guard let stored = try storage.rulesMAC(), try old.rulesMACMatches(stored, oldRows) else {
            throw refused("the access rules' MAC")
        }
        try storage.setRulesMAC(new.rulesMAC(newRows))
    }

    /// Each batch is opened with the old log key pair and its plaintext sealed to the new public
    /// key under the same sequence: the clear columns, a chained batch's digest and its
    /// signature stay as they are.
    private func resealAccessLog(_ counts: inout Counts) throws(VaultError) {
        let oldKeys = try AccessLogKeys(cipher: old)
        let newKeys = try AccessLogKeys(cipher: new)
        for stored in try storage.accessLogBatches(since: nil, afterSequence: nil) {
            guard case .row(let row) = stored else { throw refused("an access log batch (malformed)") }
            guard case .success(let resealed) = try oldKeys.reseal(row, to: newKeys.sealer) else {
                throw refused("access log batch \(row.sequence)")
            }
            try storage.replaceAccessLogBatch(sequence: row.sequence, sealed: resealed)
            counts.accessLogBatches += 1
        }
    }

    /// The header as stored, its MAC checked with the old key; the new one binds the same
    /// format version (`sealedAs`).
    private func checkedHeader() throws(VaultError) -> (itemSizeLimit: Int, sealedAs: Int?) {
        guard let header = try storage.header() else { throw refused("the vault header (missing)") }
        let version = try storage.formatVersion()
        let sealedAs: Int? = version >= VaultFormat.oldestSealedVersion ? version : nil
        guard old.headerMACMatches(header.mac, itemSizeLimit: header.itemSizeLimit, oldestFormat: sealedAs) else {
            throw .integrityFailure("vault header (sealed with another key: rotated meanwhile, or tampered with)")
        }
        return (header.itemSizeLimit, sealedAs)
    }
}
