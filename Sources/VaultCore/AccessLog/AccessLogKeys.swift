import CSodium

/// The access log's key pair: `crypto_box_seed_keypair` seeded with subkey 8 of the master key,
/// so it needs nothing stored and is the same at every unlock. The secret half is in locked
/// memory and is only derived to read the log (with the passphrase), never by a mount.
struct AccessLogKeys: ~Copyable {
    static let subkeyID: UInt64 = 8

    let sealer: AccessLogSealer
    private let secretKey: SecureBuffer

    init(cipher: RecordCipher) throws(VaultError) {
        let seed = try cipher.withMasterKey { (master) throws(VaultError) in try KeyDerivation.subkey(AccessLogKeys.subkeyID, of: master) }
        precondition(seed.count == Int(crypto_box_seedbytes()), "access log seed of the wrong size")
        var publicKey = [UInt8](repeating: 0, count: AccessLogSealer.publicKeyBytes)
        var secret = try SecureBuffer(capacity: Int(crypto_box_secretkeybytes()))
        seed.withUnsafeBytes { seedBytes in
            secret.withUnsafeMutableStorage { out in
                let rc = crypto_box_seed_keypair(&publicKey, out.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                 seedBytes.baseAddress!.assumingMemoryBound(to: UInt8.self))
                precondition(rc == 0, "crypto_box_seed_keypair failed")
                return out.count
            }
        }
        sealer = AccessLogSealer(vaultID: cipher.vaultID, publicKey: publicKey)
        secretKey = secret
    }

    /// A stored batch opened, or why it is refused: it fails to open, or opens and belongs to
    /// another place (sequence, vault), or disagrees with its row's clear columns or, chained,
    /// with the digest kept in front of it, or its signature does not hold.
    func open(_ row: AccessLogRow) throws(VaultError) -> Result<AccessLogBatch.Opened, AccessLogDefect> {
        guard let opened = try openPlain(row) else { return .failure(.failedAuthentication) }
        return checked(opened, row)
    }

    /// The same batch sealed to `sealer` (a rotation's new log key), once it passed every check
    /// of `open`: the plaintext, and so the digest and any signature, unchanged. Each box is
    /// opened once.
    func reseal(_ row: AccessLogRow, to sealer: AccessLogSealer) throws(VaultError) -> Result<[UInt8], AccessLogDefect> {
        guard let opened = try openPlain(row) else { return .failure(.failedAuthentication) }
        if case .failure(let defect) = checked(opened, row) { return .failure(defect) }
        return .success((opened.kept ?? []) + sealer.seal(opened.plain))
    }

    /// The batch a row's box opened to, decoded and held against the row.
    private func checked(_ opened: borrowing OpenedRow, _ row: AccessLogRow) -> Result<AccessLogBatch.Opened, AccessLogDefect> {
        let kept = opened.kept
        switch AccessLogBatch.decode(opened.plain, vaultID: sealer.vaultID, sequence: row.sequence) {
        case .failure(.malformed): return .failure(.malformed)
        case .failure(.badSignature): return .failure(.badSignature)
        case .failure(.otherVault): return .failure(.otherVault)
        case .failure(.otherSequence(let sealed)): return .failure(.moved(sealedAs: sealed))
        case .success(let opened):
            // The form the row has (a digest in front or not) must be the one sealed inside.
            guard (kept == nil) == (opened.chain == nil) else { return .failure(.malformed) }
            if let kept, kept != opened.digest { return .failure(.digestEdited) }
            let seconds = opened.entries.map(\.time.seconds)
            guard opened.entries.count == row.entries, seconds.min() == row.firstTime, seconds.max() == row.lastTime else {
                return .failure(.clearColumnsDisagree)
            }
            return .success(opened)
        }
    }

    /// The padded plaintext of a row and the digest kept in front of its box (chained rows).
    func openPlain(_ row: AccessLogRow) throws(VaultError) -> OpenedRow? {
        let overhead = AccessLogSealer.overheadBytes
        let kept = AccessLogSealer.keptDigest(row.sealed)
        let box = row.sealed.dropFirst(kept == nil ? 0 : AccessLogBatch.digestBytes)
        guard kept != nil || (box.count > overhead && (box.count - overhead) % AccessLogBatch.block == 0) else { return nil }
        let plainCount = box.count - overhead
        var plain = try SecureBuffer(capacity: plainCount)
        var rc: Int32 = -1
        secretKey.withUnsafeBytes { secret in
            plain.withUnsafeMutableStorage { out in
                rc = box.withUnsafeBufferPointer { sealed in
                    crypto_box_seal_open(out.baseAddress!.assumingMemoryBound(to: UInt8.self), sealed.baseAddress!, UInt64(sealed.count),
                                         sealer.publicKey, secret.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
                return rc == 0 ? plainCount : 0
            }
        }
        guard rc == 0 else { return nil }
        return OpenedRow(plain: plain, kept: kept)
    }

    struct OpenedRow: ~Copyable {
        let plain: SecureBuffer
        let kept: [UInt8]?
    }
}
