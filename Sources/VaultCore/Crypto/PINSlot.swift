import CSodium
import TPMSeal

/// Seals and opens a TPM PIN slot (format 10 on). One Argon2id run of the PIN (the slot's salt
/// and cost) gives two keys through crypto_kdf: the authorization value of a 32-byte random
/// key sealed by the TPM (PolicyAuthValue, optionally PolicyPCR: `TPMConnection.seal`), and the
/// PIN's half of the wrapping key. The wrapping key is keyed BLAKE2b of that half under the
/// unsealed key, so it takes the TPM (which counts wrong PINs toward its lockout) and the PIN
/// both: whoever breaks the seal (reads the sealed key and authorization value out of the chip)
/// still pays one Argon2id per guess of the PIN, and the PIN alone gives nothing without the chip.
/// The wrapped master key's associated data binds the slot id, the cost, the PCRs and a hash of
/// the sealed object, so none of them can be edited in the row without the slot failing.
enum PINSlot {
    /// A vault has one PIN slot: the one of the machine whose TPM sealed it.
    static let id: Int64 = 1
    /// What the slot takes at the least: a short PIN is the point, guessing it is the TPM's to stop.
    static let minimumPINBytes = 4
    private static let keyBytes = 32
    /// crypto_kdf's context for the two keys from the PIN's Argon2id output.
    private static let context = "KCFS pin"
    private enum Derived: UInt64 { case authValue = 1, pinHalf = 2 }

    /// The PCR numbers (SHA-256 bank) as one bit each; refuses numbers a TPM does not have.
    static func mask(of pcrs: [Int]) throws(VaultError) -> UInt32 {
        var mask: UInt32 = 0
        for pcr in pcrs {
            guard (0..<24).contains(pcr) else { throw .invalidArgument("PCR \(pcr) does not exist (a TPM has PCRs 0 to 23)") }
            mask |= 1 << UInt32(pcr)
        }
        return mask
    }

    static func pcrs(of mask: UInt32) -> [Int] { (0..<24).filter { mask & (1 << UInt32($0)) != 0 } }

    static func checkPIN(_ pin: borrowing SecureBuffer) throws(VaultError) {
        guard pin.count >= minimumPINBytes else { throw .invalidArgument("a TPM PIN has at least \(minimumPINBytes) characters") }
    }

    /// Seals `master` in a new slot under `pin`, with a key sealed by the TPM `TPMConnection.configuration` names.
    static func seal(master: borrowing SecureBuffer, pin: borrowing SecureBuffer, pcrs: [Int],
                     parameters: KDFParameters) throws(VaultError) -> PINSlotRow {
        try checkPIN(pin)
        let pcrMask = try mask(of: pcrs)
        let salt = randomBytes(KeyDerivation.saltBytes)
        let stretched = try KeyDerivation.keyEncryptionKey(passphrase: pin, salt: salt, parameters: parameters)
        let authValue = try derive(.authValue, from: stretched)
        var tpmKey = try SecureBuffer(capacity: keyBytes)
        tpmKey.withUnsafeMutableStorage { out in
            randombytes_buf(out.baseAddress!, out.count)
            return out.count
        }
        let connection = try connect()
        let sealed: [UInt8]
        do {
            sealed = try tpmKey.withUnsafeBytes { (key) throws(TPMFailure) in
                try authValue.withUnsafeBytes { (auth) throws(TPMFailure) in try connection.seal(key, authValue: auth, pcrs: pcrs) }
            }
        } catch {
            throw refusal(error)
        }
        let kek = try wrappingKey(tpmKey: tpmKey, pinHalf: try derive(.pinHalf, from: stretched))
        let ad = RecordCipher.pinSlotAssociatedData(slotID: id, parameters: parameters, pcrMask: pcrMask, sealedKey: sealed)
        let wrapped = master.withUnsafeBytes { AEAD.seal($0, key: kek, associatedData: ad) }
        return PINSlotRow(id: id, parameters: parameters, salt: salt, pcrMask: pcrMask, sealedKey: sealed, wrappedMasterKey: wrapped)
    }

    /// The master key in `row`, with `pin` and this machine's TPM. A wrong PIN is `.wrongPIN`
    /// (the TPM counted it); a TPM that refuses for another reason, `.pinSlotRefused`.
    static func open(_ row: PINSlotRow, pin: borrowing SecureBuffer) throws(VaultError) -> SecureBuffer {
        // Before the key derivation: a PIN too short to have been enrolled costs the TPM no try.
        guard pin.count >= minimumPINBytes else { throw .wrongPIN }
        let stretched = try stretch(pin, for: row)
        let tpmKey = try unsealKey(row, authValue: try derive(.authValue, from: stretched))
        // The TPM took the PIN, so the PIN is right: a box that fails was changed.
        guard let master = try unwrap(row, tpmKey: tpmKey, stretchedPIN: stretched) else { throw .integrityFailure("TPM PIN slot") }
        return master
    }

    /// The PIN's Argon2id output under the slot's salt and cost.
    static func stretch(_ pin: borrowing SecureBuffer, for row: PINSlotRow) throws(VaultError) -> SecureBuffer {
        try KeyDerivation.keyEncryptionKey(passphrase: pin, salt: row.salt, parameters: row.parameters)
    }

    /// The authorization value the TPM's sealed key takes, from the PIN's Argon2id output.
    static func authValue(fromStretched stretched: borrowing SecureBuffer) throws(VaultError) -> SecureBuffer {
        try derive(.authValue, from: stretched)
    }

    /// The key the TPM sealed in `row`, unsealed with `authValue` (and the PCRs' present values).
    static func unsealKey(_ row: PINSlotRow, authValue: borrowing SecureBuffer) throws(VaultError) -> SecureBuffer {
        guard row.pcrMask < 1 << 24 else { throw .integrityFailure("TPM PIN slot (PCRs that do not exist)") }
        let connection = try connect()
        var tpmKey = try SecureBuffer(capacity: keyBytes)
        do {
            try tpmKey.withUnsafeMutableStorage { (out) throws(TPMFailure) in
                try authValue.withUnsafeBytes { (auth) throws(TPMFailure) in
                    try connection.unseal(row.sealedKey, authValue: auth, pcrs: pcrs(of: row.pcrMask), into: out)
                }
            }
        } catch {
            throw refusal(error)
        }
        guard tpmKey.count == keyBytes else { throw .integrityFailure("TPM PIN slot (its sealed key is not \(keyBytes) bytes)") }
        return tpmKey
    }

    /// The master key `row` wraps, given the TPM's key and the PIN's Argon2id output; nil when
    /// either is not the slot's (or the row was changed).
    static func unwrap(_ row: PINSlotRow, tpmKey: borrowing SecureBuffer, stretchedPIN: borrowing SecureBuffer) throws(VaultError) -> SecureBuffer? {
        let kek = try wrappingKey(tpmKey: tpmKey, pinHalf: try derive(.pinHalf, from: stretchedPIN))
        let ad = RecordCipher.pinSlotAssociatedData(slotID: row.id, parameters: row.parameters, pcrMask: row.pcrMask, sealedKey: row.sealedKey)
        var master = try SecureBuffer(capacity: KeyDerivation.masterKeyBytes)
        guard AEAD.open(row.wrappedMasterKey, key: kek, associatedData: ad, into: &master),
              master.count == KeyDerivation.masterKeyBytes else { return nil }
        return master
    }

    static func connect() throws(VaultError) -> TPMConnection {
        guard let configuration = TPMConnection.configuration else { throw .pinSlotRefused(.noTPM(nil)) }
        do {
            return try TPMConnection(configuration: configuration)
        } catch {
            throw refusal(error)
        }
    }

    private static func refusal(_ failure: TPMFailure) -> VaultError {
        switch failure {
        case .wrongAuthorization: .wrongPIN
        case .lockedOut: .pinSlotRefused(.lockedOut)
        case .pcrsChanged: .pinSlotRefused(.pcrsChanged)
        case .otherTPM: .pinSlotRefused(.otherTPM)
        case .unreachable(let configuration): .pinSlotRefused(.noTPM(configuration))
        case .full: .storageFailure("TPM: no room left")
        case .failed(let reason): .storageFailure("TPM: \(reason)")
        }
    }

    /// Key `which` of the PIN's Argon2id output, straight into locked memory.
    private static func derive(_ which: Derived, from stretched: borrowing SecureBuffer) throws(VaultError) -> SecureBuffer {
        var key = try SecureBuffer(capacity: keyBytes)
        stretched.withUnsafeBytes { s in
            key.withUnsafeMutableStorage { out in
                let rc = crypto_kdf_derive_from_key(out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count, which.rawValue,
                                                    context, s.baseAddress!.assumingMemoryBound(to: UInt8.self))
                precondition(rc == 0, "crypto_kdf_derive_from_key failed")
                return out.count
            }
        }
        return key
    }

    /// Keyed BLAKE2b of the PIN's half under the TPM's key: neither alone gives it.
    private static func wrappingKey(tpmKey: borrowing SecureBuffer, pinHalf: borrowing SecureBuffer) throws(VaultError) -> SecureBuffer {
        var kek = try SecureBuffer(capacity: AEAD.keyBytes)
        tpmKey.withUnsafeBytes { k in
            pinHalf.withUnsafeBytes { p in
                kek.withUnsafeMutableStorage { out in
                    let rc = crypto_generichash(out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count,
                                                p.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(p.count),
                                                k.baseAddress!.assumingMemoryBound(to: UInt8.self), k.count)
                    precondition(rc == 0, "crypto_generichash failed")
                    return out.count
                }
            }
        }
        return kek
    }
}
