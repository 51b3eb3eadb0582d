import CSodium

/// Seals access log batches to the vault's log key: libsodium's sealed box (`crypto_box_seal`,
/// an ephemeral X25519 key per batch) to the public half of a key pair whose seed is subkey 8
/// of the master key (`AccessLogKeys`).
///
/// Only the public key is held here, so a mount keeps logging while locked (denials, the lock
/// itself) with nothing in its memory that can read a batch back: opening one needs the
/// passphrase.
public final class AccessLogSealer: Sendable {
    static let publicKeyBytes = Int(crypto_box_publickeybytes())
    static let overheadBytes = Int(crypto_box_sealbytes())

    let vaultID: [UInt8]
    let publicKey: [UInt8]

    init(vaultID: [UInt8], publicKey: [UInt8]) {
        precondition(publicKey.count == AccessLogSealer.publicKeyBytes, "access log public key of the wrong size")
        self.vaultID = vaultID
        self.publicKey = publicKey
    }

    func seal(_ plain: borrowing SecureBuffer) -> [UInt8] {
        var sealed = [UInt8](repeating: 0, count: plain.count + AccessLogSealer.overheadBytes)
        let rc = plain.withUnsafeBytes { bytes in
            crypto_box_seal(&sealed, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(bytes.count), publicKey)
        }
        precondition(rc == 0, "crypto_box_seal failed")
        return sealed
    }

    /// Appends `entries` as the next batch and prunes to `bounds`, inside the caller's `write`
    /// (so a change and the entry that records it commit together, or neither). From format 11
    /// the batch is chained to the newest one and signed by `signer` when there is one; the
    /// result is then its sequence and digest, for this machine to record as seen, unless the
    /// log no longer holds `seen` (the newest batch this machine saw before): then nil, so the
    /// record keeps naming the batch that went, and `log` goes on saying so.
    @discardableResult
    func append(_ entries: [AccessLogEntry], to storage: any VaultStorage, bounds: AccessLogBounds, signer: LogSigner?,
                seen: LogHead? = nil, now: Int64 = Timestamp.now().seconds) throws(VaultError) -> LogHead? {
        guard !entries.isEmpty, bounds.isEnabled else { return nil }
        let sequence = try storage.nextAccessLogSequence()
        let sealed: [UInt8]
        var head: LogHead? = nil
        if try storage.formatVersion() >= VaultFormat.oldestWithChainedLog {
            var previous = [UInt8](repeating: 0, count: AccessLogBatch.digestBytes)
            if sequence > 1, let newest = try storage.sealedAccessLogBatch(sequence: sequence - 1),
               let digest = AccessLogSealer.keptDigest(newest) {
                previous = digest
            }
            let chained = try AccessLogBatch.sealChained(entries, vaultID: vaultID, sequence: sequence, previous: previous,
                                                         signer: signer, to: self)
            sealed = chained.sealed
            if try AccessLogSealer.stillHolds(seen, storage, before: sequence, newest: previous) {
                head = LogHead(sequence: sequence, digest: chained.digest)
            }
        } else {
            sealed = seal(try AccessLogBatch.encode(entries, vaultID: vaultID, sequence: sequence))
        }
        let seconds = entries.map(\.time.seconds)
        try storage.appendAccessLogBatch(AccessLogRow(sequence: sequence, firstTime: seconds.min()!, lastTime: seconds.max()!,
                                                      entries: entries.count, sealed: sealed))
        let (days, overflow) = Int64(bounds.days).multipliedReportingOverflow(by: 86_400)
        try storage.pruneAccessLog(olderThan: overflow ? Int64.min : now - days, maximumEntries: bounds.entries)
        return head
    }

    /// Whether the log, about to take batch `sequence` after one of digest `newest`, still holds
    /// the batch this machine saw (or pruned it, as it prunes the oldest).
    private static func stillHolds(_ seen: LogHead?, _ storage: any VaultStorage, before sequence: Int64,
                                   newest: [UInt8]) throws(VaultError) -> Bool {
        guard let seen else { return true }
        guard seen.sequence < sequence else { return false }
        if seen.sequence == sequence - 1 { return seen.digest == newest }
        guard let stored = try storage.sealedAccessLogBatch(sequence: seen.sequence) else { return true }
        return keptDigest(stored) == seen.digest
    }

    /// The digest a chained row keeps in front of its box; nil for an older row. A chained row
    /// is `digest | box` and an older one `box`: a box of padded batches is 48 bytes over a
    /// multiple of 256, so the two lengths never meet.
    static func keptDigest(_ sealed: [UInt8]) -> [UInt8]? {
        let chainedCount = sealed.count - overheadBytes - AccessLogBatch.digestBytes
        guard chainedCount > 0, chainedCount % AccessLogBatch.block == 0 else { return nil }
        return Array(sealed.prefix(AccessLogBatch.digestBytes))
    }
}
