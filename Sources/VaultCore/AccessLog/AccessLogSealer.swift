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
    /// (so a change and the entry that records it commit together, or neither).
    func append(_ entries: [AccessLogEntry], to storage: any VaultStorage, bounds: AccessLogBounds,
                now: Int64 = Timestamp.now().seconds) throws(VaultError) {
        guard !entries.isEmpty, bounds.isEnabled else { return }
        let sequence = try storage.nextAccessLogSequence()
        let plain = try AccessLogBatch.encode(entries, vaultID: vaultID, sequence: sequence)
        let seconds = entries.map(\.time.seconds)
        try storage.appendAccessLogBatch(AccessLogRow(sequence: sequence, firstTime: seconds.min()!, lastTime: seconds.max()!,
                                                      entries: entries.count, sealed: seal(plain)))
        let (days, overflow) = Int64(bounds.days).multipliedReportingOverflow(by: 86_400)
        try storage.pruneAccessLog(olderThan: overflow ? Int64.min : now - days, maximumEntries: bounds.entries)
    }
}
