import Glibc

/// The access log: sealed batches of entries (see `AccessLogSealer` for why sealed boxes).
extension Vault {
    /// What a mount logs with: the log's public key only, so it keeps working while the vault is
    /// locked. Needs the vault unlocked to derive it.
    public func accessLogSealer() throws(VaultError) -> AccessLogSealer {
        try withStore { (store) throws(VaultError) in try AccessLogKeys(cipher: store.cipher).sealer }
    }

    /// Appends `entries` as one batch, pruned to `bounds`, in one durable transaction. With a
    /// sealer this works while locked; without one it derives it (unlocked only).
    public func appendAccessLog(_ entries: [AccessLogEntry], sealer: AccessLogSealer? = nil,
                                bounds: AccessLogBounds = .default) throws(VaultError) {
        guard !entries.isEmpty, bounds.isEnabled else { return }
        // Unseen by this connection's change token: the mount's own log batches change nothing
        // that a listing or the rules read. A sealer the caller kept from before a rotation is
        // replaced by the current one.
        try appendingToLog(given: sealer) { (storage, current, signer, seen) throws(VaultError) -> LogHead? in
            try current.append(entries, to: storage, bounds: bounds, signer: signer, seen: seen)
        }
    }

    /// The entry of a change this process makes with the passphrase (a rule or class change by
    /// the command line, a member added or removed: `member` names them): its own pid and
    /// executable.
    static func ownChange(_ access: LoggedAccess, at path: VaultPath? = nil, member: String? = nil) -> AccessLogEntry {
        let me = ProcessIdentity(pid: getpid())
        return AccessLogEntry(pid: getpid(), executable: me.executable?.path, unit: me.unit, path: path, access: access,
                              decision: .allowed, aboutMember: member)
    }

    /// Records `access` to `path` by this process through the vault itself (the command line
    /// holding the key, with no daemon between), when the vault has members: the team log holds
    /// every member's reads and changes, not only those through a mount. A vault of one owner
    /// logs only what programs do through a mount, as before. Offline (read from the replica,
    /// which takes no writes) this is `.offline`: the caller says the access went unrecorded.
    public func recordInTeamLog(_ access: LoggedAccess, at path: VaultPath) throws(VaultError) {
        let team = try withStorage { (storage) throws(VaultError) -> Bool in
            try storage.read { () throws(VaultError) -> Bool in
                guard try storage.formatVersion() >= VaultFormat.oldestWithMembers else { return false }
                return try !storage.memberSlots().isEmpty
            }
        }
        guard team else { return }
        try appendAccessLog([Vault.ownChange(access, at: path)])
    }

    /// The same inside a transaction the caller holds (a rule change and its entry commit together).
    func appendAccessLog(_ entries: [AccessLogEntry], in store: NodeStore, bounds: AccessLogBounds = .default) throws(VaultError) {
        guard !entries.isEmpty, bounds.isEnabled else { return }
        _ = try AccessLogKeys(cipher: store.cipher).sealer.append(entries, to: store.storage, bounds: bounds, signer: store.signer)
    }

    /// Batches, entries and the newest sequence; needs no key (works while locked).
    public func accessLogSummary() throws(VaultError) -> AccessLogSummary {
        try withStorage { (storage) throws(VaultError) in try storage.accessLogSummary() }
    }

    /// Opens the batches whose last entry is at or after `since` (seconds since the epoch) and
    /// whose sequence is above `afterSequence`. Entries recorded by node whose path was not
    /// resolved when written get their node's path now, if it still exists. A batch that fails is
    /// a problem in the result, never skipped in silence.
    public func accessLog(since: Int64? = nil, afterSequence: Int64? = nil) throws(VaultError) -> AccessLogReading {
        let heads = since == nil && afterSequence == nil ? seenLogHeads() : nil
        let seen = heads?.recorded
        return try reading(naming: .paths) { (store) throws(VaultError) -> AccessLogReading in
            let keys = try AccessLogKeys(cipher: store.cipher)
            let signers = try memberSigningKeys(store)
            var entries: [AccessLogEntry] = []
            var problems: [IntegrityProblem] = []
            var last = afterSequence
            for (sequence, outcome) in try openBatches(store, keys, signers, since: since, afterSequence: afterSequence, seen: seen, heads: heads) {
                switch outcome {
                case .success(let batch): entries += batch
                case .failure(let defect): problems.append(AccessLogDefect.problem(sequence, defect))
                }
                last = sequence.map { max($0, last ?? $0) } ?? last
            }
            let unresolved = Set(entries.compactMap { $0.path == nil ? $0.node : nil })
            if !unresolved.isEmpty {
                let found = try paths(of: unresolved, in: store)
                for index in entries.indices where entries[index].path == nil {
                    if let node = entries[index].node { entries[index].path = found[node] }
                }
            }
            if since != nil { entries.removeAll { $0.time.seconds < since! } }
            return AccessLogReading(entries: entries, problems: problems, lastSequence: last, hasMembers: !signers.isEmpty)
        }
    }

    /// Each member's name and the signing key their slot names (nil for a key that has none);
    /// slots whose MAC does not hold (added without the vault's key) vouch for nobody.
    private func memberSigningKeys(_ store: NodeStore) throws(VaultError) -> [[UInt8]: [UInt8]?] {
        guard try store.storage.formatVersion() >= VaultFormat.oldestWithMembers else { return [:] }
        var keys: [[UInt8]: [UInt8]?] = [:]
        for row in try store.storage.memberSlots() {
            let vouched = try store.cipher.withMasterKey { (master) throws(VaultError) -> Bool in
                (try? MemberSlot.check(row, vaultID: store.cipher.vaultID, master: master)) != nil
            }
            guard vouched, let key = MemberPublicKey(bytes: row.publicKey) else { continue }
            keys[row.name] = .some(key.signingKey)
        }
        return keys
    }

    /// Every batch opened in order, and a gap in the sequences (pruning removes only the oldest,
    /// so one means batches were deleted). Without `since` only: batch times need not grow with
    /// their sequences (the clock may go back), so a time filter may leave gaps of its own.
    /// From format 11 every batch must be chained, and name the digest of the one before it
    /// when that one was read; a signed batch's entries name its member, whose slot must name
    /// the key that signed it (a name no slot has is a former member's).
    /// `seen` (`heads.recorded`, read before this transaction began) is compared with a whole
    /// log, and a whole log that passes is recorded in `heads` as seen.
    private func openBatches(_ store: NodeStore, _ keys: borrowing AccessLogKeys, _ signers: [[UInt8]: [UInt8]?], since: Int64?,
                             afterSequence: Int64?, seen: LogHead?,
                             heads: SeenLogHeads?) throws(VaultError) -> [(Int64?, Result<[AccessLogEntry], AccessLogDefect>)] {
        let chained = try store.storage.formatVersion() >= VaultFormat.oldestWithChainedLog
        let whole = since == nil && afterSequence == nil
        let seen = whole ? seen : nil
        var digestAtSeen: [UInt8]? = nil
        var newest: LogHead? = nil
        var outcomes: [(Int64?, Result<[AccessLogEntry], AccessLogDefect>)] = []
        var previous = afterSequence
        var previousDigest: [UInt8]? = nil
        defer {
            // Only a log that passed every check is recorded as seen.
            if whole, let newest, !outcomes.contains(where: { if case .failure = $0.1 { true } else { false } }) {
                heads?.record(newest)
            }
        }
        for stored in try store.storage.accessLogBatches(since: since, afterSequence: afterSequence) {
            switch stored {
            case .malformed(let sequence):
                outcomes.append((sequence, .failure(.malformedRow)))
                previousDigest = nil
            case .row(let row):
                if since == nil, let previous, row.sequence != previous + 1 {
                    outcomes.append((row.sequence, .failure(.missingBatches(after: previous, next: row.sequence))))
                }
                let follows = previous.map { row.sequence == $0 + 1 } ?? false
                let opened = try keys.open(row)
                let outcome = opened.flatMap { (opened) -> Result<[AccessLogEntry], AccessLogDefect> in
                    guard let chain = opened.chain else { return chained ? .failure(.unchained) : .success(opened.entries) }
                    if follows, let previousDigest, chain.previous != previousDigest {
                        return .failure(.chainBroken(after: row.sequence - 1))
                    }
                    guard let signer = chain.signer else { return .success(opened.entries) }
                    let name = String(decoding: signer.name, as: UTF8.self)
                    let member: LoggedMember
                    switch signers[signer.name] {
                    case .none: member = LoggedMember(name: name, isMember: false)
                    case .some(let key) where key == signer.key: member = LoggedMember(name: name, isMember: true)
                    case .some: return .failure(.notSignedByMember(name))
                    }
                    return .success(opened.entries.map { entry in
                        var signed = entry
                        signed.member = member
                        return signed
                    })
                }
                outcomes.append((row.sequence, outcome))
                // The next batch names this one's digest, whatever was wrong with this one.
                previousDigest = (try? opened.get())?.digest
                previous = row.sequence
                let kept = AccessLogSealer.keptDigest(row.sealed)
                if row.sequence == seen?.sequence { digestAtSeen = kept }
                newest = kept.map { LogHead(sequence: row.sequence, digest: $0) }
            }
        }
        if let seen {
            if (previous ?? 0) < seen.sequence {
                outcomes.append((seen.sequence, .failure(.newestDeleted(after: previous ?? 0))))
            } else if let digestAtSeen, digestAtSeen != seen.digest {
                outcomes.append((seen.sequence, .failure(.replacedSinceSeen)))
            }
        }
        return outcomes
    }

    /// The paths of `nodes` as they are now, in one snapshot; nodes that no longer exist (or
    /// fail authentication) are left out. What a mount resolves its entries with when it flushes.
    public func paths(of nodes: Set<NodeID>) throws(VaultError) -> [NodeID: VaultPath] {
        try reading { (store) throws(VaultError) in try paths(of: nodes, in: store) }
    }

    private func paths(of nodes: Set<NodeID>, in store: NodeStore) throws(VaultError) -> [NodeID: VaultPath] {
        // Parents are shared by most entries of a batch: each node is read and decrypted once.
        // A node that cannot be resolved (gone, or locked out) keeps its id in the entry.
        var known: [NodeID: VaultPath] = [:]
        var result: [NodeID: VaultPath] = [:]
        for node in nodes {
            if let found = try? store.path(of: node, known: &known) { result[node] = found }
        }
        return result
    }

    /// Every batch opens, sits at its own sequence, and none is missing between the oldest kept
    /// and the newest; for `verify`.
    func verifyAccessLog(_ store: NodeStore, seen: LogHead?, heads: SeenLogHeads?) throws(VaultError) -> [IntegrityProblem] {
        let keys = try AccessLogKeys(cipher: store.cipher)
        return try openBatches(store, keys, memberSigningKeys(store), since: nil, afterSequence: nil, seen: seen,
                               heads: heads).compactMap { sequence, outcome in
            guard case .failure(let defect) = outcome else { return nil }
            return AccessLogDefect.problem(sequence, defect)
        }
    }
}

extension AccessLogDefect {
    static func problem(_ sequence: Int64?, _ defect: AccessLogDefect) -> IntegrityProblem {
        IntegrityProblem(path: "<access log batch \(sequence.map(String.init) ?? "?")>", reason: defect.description)
    }
}
