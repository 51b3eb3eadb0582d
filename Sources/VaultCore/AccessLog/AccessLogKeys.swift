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

    /// The entries of a stored batch, or why it is refused: it fails to open, or opens and
    /// belongs to another place (sequence, vault), or disagrees with its row's clear columns.
    func open(_ row: AccessLogRow) throws(VaultError) -> Result<[AccessLogEntry], AccessLogDefect> {
        let plainCount = row.sealed.count - AccessLogSealer.overheadBytes
        guard plainCount > 0, plainCount % AccessLogBatch.block == 0 else { return .failure(.failedAuthentication) }
        var plain = try SecureBuffer(capacity: plainCount)
        var rc: Int32 = -1
        secretKey.withUnsafeBytes { secret in
            plain.withUnsafeMutableStorage { out in
                rc = crypto_box_seal_open(out.baseAddress!.assumingMemoryBound(to: UInt8.self), row.sealed, UInt64(row.sealed.count),
                                          sealer.publicKey, secret.baseAddress!.assumingMemoryBound(to: UInt8.self))
                return rc == 0 ? plainCount : 0
            }
        }
        guard rc == 0 else { return .failure(.failedAuthentication) }
        switch AccessLogBatch.decode(plain, vaultID: sealer.vaultID, sequence: row.sequence) {
        case .failure(.malformed): return .failure(.malformed)
        case .failure(.otherVault): return .failure(.otherVault)
        case .failure(.otherSequence(let sealed)): return .failure(.moved(sealedAs: sealed))
        case .success(let entries):
            let seconds = entries.map(\.time.seconds)
            guard entries.count == row.entries, seconds.min() == row.firstTime, seconds.max() == row.lastTime else {
                return .failure(.clearColumnsDisagree)
            }
            return .success(entries)
        }
    }
}
