import CSodium

/// Seals and opens a member's key slot. A sealed box takes no associated data, so what the slot
/// is bound to goes into its plaintext after the master key: the purpose, the vault id, the
/// member's public key and name. Opening compares them with the row and the vault's header, so
/// a slot copied to another vault, renamed, or put under another key fails. (Anyone holding a
/// public key can seal a box to it; a forged slot would carry a master key the vault's header
/// MAC refuses.)
enum MemberSlot {
    private static let purpose: [UInt8] = RecordCipher.formatTag + Array("member slot".utf8)

    private static func binding(vaultID: [UInt8], name: [UInt8], publicKey: MemberPublicKey) -> [UInt8] {
        var bound = purpose + vaultID + publicKey.bytes
        bound.appendLittleEndian(UInt64(name.count))
        return bound + name
    }

    static func seal(master: borrowing SecureBuffer, vaultID: [UInt8], name: [UInt8], publicKey: MemberPublicKey) throws(VaultError) -> MemberSlotRow {
        let bound = binding(vaultID: vaultID, name: name, publicKey: publicKey)
        var plain = try SecureBuffer(capacity: master.count + bound.count)
        try master.withUnsafeBytes { (bytes) throws(VaultError) in try plain.append(bytes) }
        let failed = bound.withUnsafeBytes { (bytes) -> VaultError? in
            do throws(VaultError) { try plain.append(bytes) } catch { return error }
            return nil
        }
        if let failed { throw failed }
        let sealed = plain.withUnsafeBytes { publicKey.seal($0) }
        return MemberSlotRow(name: name, publicKey: publicKey.bytes, sealedMasterKey: sealed)
    }

    /// The master key in `row`, when it is sealed to `member`'s key; nil when it is another's.
    /// A slot of this key that is bound to another vault, name or key is an integrity failure.
    static func open(_ row: MemberSlotRow, vaultID: [UInt8], member: MemberKey) throws(VaultError) -> SecureBuffer? {
        guard row.publicKey == member.publicKey.bytes else { return nil }
        let bound = binding(vaultID: vaultID, name: row.name, publicKey: member.publicKey)
        let count = KeyDerivation.masterKeyBytes + bound.count
        var plain = try SecureBuffer(capacity: count)
        let name = String(decoding: row.name, as: UTF8.self)
        guard member.openSealedBox(row.sealedMasterKey, count: count, into: &plain) else {
            throw .integrityFailure("member slot \(name)")
        }
        let matches = plain.withUnsafeBytes { bytes in
            bound.withUnsafeBytes { sodium_memcmp(bytes.baseAddress! + KeyDerivation.masterKeyBytes, $0.baseAddress!, bound.count) == 0 }
        }
        guard matches else { throw .integrityFailure("member slot \(name) (bound to another vault, name or key)") }
        return try plain.withUnsafeBytes { (bytes) throws(VaultError) in
            try SecureBuffer(copying: UnsafeRawBufferPointer(rebasing: bytes.prefix(KeyDerivation.masterKeyBytes)))
        }
    }
}
