/// One step of the in-place upgrades: rewrites what format `target - 1` holds into what
/// format `target` holds. Steps run in order, all in one transaction that also sets the new
/// version, so a vault is upgraded completely or not at all (a crash leaves the old one).
struct FormatUpgrade: Sendable {
    let target: Int
    let run: @Sendable (NodeStore) throws(VaultError) -> Void

    /// In order, one per version after `VaultFormat.oldestUpgradable`; each new format adds its
    /// step here (and, if its tables change, a migration in the storage).
    static let steps: [FormatUpgrade] = [
        FormatUpgrade(target: 2, run: resealAttributesInLayout2),
        // 2 -> 3: the storage adds the table of a node's attributes (empty); no record changes.
        FormatUpgrade(target: 3, run: { _ in }),
        FormatUpgrade(target: 4, run: upgradeTo4),
        FormatUpgrade(target: 5, run: upgradeTo5),
        FormatUpgrade(target: 6, run: upgradeTo6),
        FormatUpgrade(target: 7, run: upgradeTo7),
        FormatUpgrade(target: 8, run: upgradeTo8),
        FormatUpgrade(target: 9, run: upgradeTo9),
        FormatUpgrade(target: 10, run: upgradeTo10),
        FormatUpgrade(target: 11, run: upgradeTo11),
    ]

    /// 3 -> 4. The storage adds the table of access rules (empty) and the column of their MAC,
    /// which gets the MAC of no rules. Accessibility classes: nothing to rewrite. Attributes
    /// records of layout 2 read as when-unlocked with no default class, and when-unlocked
    /// contents keep their key and associated data; a record takes layout 3 the next time it
    /// is written.
    private static func upgradeTo4(_ store: NodeStore) throws(VaultError) {
        try addAccessRules(store)
        try createAccessLogIn4(store)
        try upgradeClassesTo4(store)
        try sealFormatInHeader(store, as: 4)
    }

    /// 4 -> 5. A vault of 4 holds no item properties, so no record changes; the new number is
    /// what makes format 4 code refuse the vault once it may hold them, and the header's MAC
    /// binds it so that setting it back to 4 is caught.
    private static func upgradeTo5(_ store: NodeStore) throws(VaultError) {
        try sealFormatInHeader(store, as: 5)
    }

    /// 5 -> 6. The storage adds the (empty) table of member slots; no record changes. The new
    /// number keeps format 5 code, which knows nothing of members, from the vault.
    private static func upgradeTo6(_ store: NodeStore) throws(VaultError) {
        try sealFormatInHeader(store, as: 6)
    }

    /// 6 -> 7. Each member slot gets the MAC of its binding (`MemberSlot.withMAC`): the slots
    /// there are now are trusted, as format 6 trusted them; from now on a slot added without the
    /// master key is refused.
    private static func upgradeTo7(_ store: NodeStore) throws(VaultError) {
        let slots = try store.storage.memberSlots()
        try store.cipher.withMasterKey { (master) throws(VaultError) in
            for slot in slots {
                let marked = try MemberSlot.withMAC(slot, vaultID: store.cipher.vaultID, master: master)
                try store.storage.deleteMemberSlot(named: slot.name)
                try store.storage.insertMemberSlot(marked)
            }
        }
        try sealFormatInHeader(store, as: 7)
    }

    /// 7 -> 8. The storage adds the generation (0) and the columns of the members' MAC and the
    /// state's MAC; the member slots there are now are trusted (each slot's own MAC is checked
    /// first), as format 7 trusted them, and the rules as their MAC stands (checked when read).
    /// The upgrade's write then raises the generation to 1 and seals the state as it commits.
    private static func upgradeTo8(_ store: NodeStore) throws(VaultError) {
        let slots = try store.storage.memberSlots()
        try store.cipher.withMasterKey { (master) throws(VaultError) in
            for slot in slots { try MemberSlot.check(slot, vaultID: store.cipher.vaultID, master: master) }
        }
        try store.resealMembersMAC()
        try sealFormatInHeader(store, as: 8)
    }

    /// 8 -> 9. The storage adds the (empty) table of content blocks; no record changes: whole
    /// contents of large items still read, and take blocks at their next write. The new number
    /// keeps format 8 code, which would take a block map for a damaged content, away.
    private static func upgradeTo9(_ store: NodeStore) throws(VaultError) {
        try sealFormatInHeader(store, as: 9)
    }

    /// 9 -> 10. The storage adds the (empty) table of TPM PIN slots; no record changes. The new
    /// number keeps format 9 code, which would add members beside a PIN slot, from the vault.
    private static func upgradeTo10(_ store: NodeStore) throws(VaultError) {
        try sealFormatInHeader(store, as: 10)
    }

    /// 10 -> 11. Every batch of the access log is sealed again as a chained batch (unsigned: who
    /// wrote it was never recorded), each naming the digest of the one before, in sequence order,
    /// so from now on a batch replaced, reordered or deleted shows. The batches there are now are
    /// trusted, as format 10 trusted them; one that does not open is left as it is, and `log`
    /// and `verify` go on naming it. Member slots do not change: keys made from now on carry a
    /// signing key, older ones stay as they are.
    private static func upgradeTo11(_ store: NodeStore) throws(VaultError) {
        let keys = try AccessLogKeys(cipher: store.cipher)
        var previous = [UInt8](repeating: 0, count: AccessLogBatch.digestBytes)
        for stored in try store.storage.accessLogBatches(since: nil, afterSequence: nil) {
            guard case .row(let row) = stored, case .success(let opened) = try keys.open(row), opened.chain == nil else { continue }
            let (sealed, digest) = try AccessLogBatch.sealChained(opened.entries, vaultID: store.cipher.vaultID, sequence: row.sequence,
                                                                  previous: previous, signer: nil, to: keys.sealer)
            try store.storage.replaceAccessLogBatch(sequence: row.sequence, sealed: sealed)
            previous = digest
        }
        try sealFormatInHeader(store, as: 11)
    }

    /// From 4 on, the header's MAC binds the format version, so the vault is never read as older.
    private static func sealFormatInHeader(_ store: NodeStore, as version: Int) throws(VaultError) {
        guard let header = try store.storage.header() else { throw .integrityFailure("vault header") }
        try store.storage.updateHeaderMAC(store.cipher.headerMAC(itemSizeLimit: header.itemSizeLimit, oldestFormat: version))
    }

    /// The accessibility classes' part of format 4 (layout detection only).
    private static func upgradeClassesTo4(_ store: NodeStore) throws(VaultError) {}

    /// Brings the vault behind `store` to `VaultFormat.version`; `found` is the version it was
    /// opened at. On failure nothing has changed, and the error says so.
    static func upgrade(_ store: NodeStore, from found: Int, path: String) throws(VaultError) {
        precondition(steps.map(\.target) == Array(VaultFormat.oldestUpgradable + 1 ... VaultFormat.version),
                     "one upgrade step per format version")
        let storage = store.storage
        do {
            try storage.write(.durable) { () throws(VaultError) in
                // Again under the write lock: another process may have upgraded it meanwhile.
                let current = try storage.formatVersion()
                guard current <= VaultFormat.version else {
                    throw .unknownFormatVersion(found: current, supported: VaultFormat.version)
                }
                for step in steps where step.target > current {
                    try storage.prepareStorage(forFormatVersion: step.target)
                    try step.run(store)
                }
                if current < VaultFormat.version { try storage.setFormatVersion(VaultFormat.version) }
            }
        } catch .unknownFormatVersion(let newer, let supported) {
            throw .unknownFormatVersion(found: newer, supported: supported)
        } catch {
            throw .formatUpgradeFailed(path: path, version: found, target: VaultFormat.version, reason: error.description)
        }
    }

    /// 3 -> 4, the access log's part: the storage adds the (empty) table; no record changes,
    /// and the log key is derived from the master key, so nothing is stored for it.
    private static func createAccessLogIn4(_ store: NodeStore) throws(VaultError) {}

    /// 1 -> 2: attributes gain the access time (the modification time, lacking a better one)
    /// and, for dictionaries, the number of subdictionaries, counted from the rows as verify
    /// counts entries.
    private static func resealAttributesInLayout2(_ store: NodeStore) throws(VaultError) {
        let nodes = try store.storage.everyNode()
        var subdictionaries: [NodeID: Int] = [:]
        for case .row(let row, _) in nodes where row.id != .root && row.kind == NodeKind.dictionary.rawValue {
            subdictionaries[row.parent, default: 0] += 1
        }
        for case .row(let row, _) in nodes {
            let place = RecordPlace(node: row.id, incarnation: row.incarnation)
            // A record that fails authentication is left as it is: it fails as before, and
            // verify names it. Only what authenticates is sealed again.
            guard var attributes = try store.cipher.openAttributes(row.sealedAttributes, place, layout: .v1),
                  attributes.kind.rawValue == row.kind else { continue }
            attributes.subdictionaries = attributes.kind == .dictionary ? subdictionaries[row.id, default: 0] : 0
            try store.storage.updateAttributes(of: row.id, sealedAttributes: store.cipher.sealAttributes(attributes, place))
        }
    }

    /// 3 -> 4: no rules yet, and the MAC that says so (a missing MAC is an integrity failure).
    private static func addAccessRules(_ store: NodeStore) throws(VaultError) {
        try store.sealEmptyRules()
    }
}
