import CSodium

/// Seals and opens a member's key slot. A sealed box takes no associated data, so what the slot
/// is bound to goes into its plaintext after the master key: the purpose, the vault id, the
/// member's public key and name. Opening compares them with the row and the vault's header, so
/// a slot copied to another vault, renamed, or put under another key fails. (Anyone holding a
/// public key can seal a box to it; a forged slot would carry a master key the vault's header
/// MAC refuses.)
///
/// A box tells its owner only. Anyone who may write the slot rows could add one for a key of
/// their own, and the next rotation would wrap the new master key to it: so each slot ends in
/// a MAC of its binding under a subkey of the master key, which only a holder of the key can
/// make, and a rotation wraps the new key only to slots whose MAC holds (`check`). Slots of
/// format 6 have no MAC: the upgrade to 7 adds one to each (`withMAC`), trusting the slots the
/// vault holds then, as format 6 did.
enum MemberSlot {
    private static let purpose: [UInt8] = RecordCipher.formatTag + Array("member slot".utf8)
    private static let macBytes = Int(crypto_generichash_BYTES)

    private static func mac(of bound: [UInt8], master: borrowing SecureBuffer) throws(VaultError) -> [UInt8] {
        let key = try KeyDerivation.subkey(VaultKeys.ID.memberSlot.rawValue, of: master)
        var mac = [UInt8](repeating: 0, count: macBytes)
        key.withUnsafeBytes { k in
            _ = crypto_generichash(&mac, macBytes, bound, UInt64(bound.count), k.baseAddress!.assumingMemoryBound(to: UInt8.self), k.count)
        }
        return mac
    }

    /// Whether `row`'s MAC was made with `master`: a slot added outside keychainfs fails.
    static func check(_ row: MemberSlotRow, vaultID: [UInt8], master: borrowing SecureBuffer) throws(VaultError) {
        let name = String(decoding: row.name, as: UTF8.self)
        guard let publicKey = MemberPublicKey(bytes: row.publicKey), row.sealedMasterKey.count > macBytes else {
            throw .integrityFailure("member slot \(name) (malformed)")
        }
        let expected = try mac(of: binding(vaultID: vaultID, name: row.name, publicKey: publicKey), master: master)
        let matches = expected.withUnsafeBytes { e in
            row.sealedMasterKey.suffix(macBytes).withUnsafeBytes { sodium_memcmp(e.baseAddress!, $0.baseAddress!, macBytes) == 0 }
        }
        guard matches else { throw .integrityFailure("member slot \(name) (not added by a holder of the vault's key)") }
    }

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
        let mac = try mac(of: bound, master: master)
        return MemberSlotRow(name: name, publicKey: publicKey.bytes, sealedMasterKey: sealed + mac)
    }

    /// A format 6 slot (`row`, no MAC yet) with its MAC appended, for the upgrade to format 7.
    static func withMAC(_ row: MemberSlotRow, vaultID: [UInt8], master: borrowing SecureBuffer) throws(VaultError) -> MemberSlotRow {
        guard let publicKey = MemberPublicKey(bytes: row.publicKey) else {
            throw .integrityFailure("member slot \(String(decoding: row.name, as: UTF8.self)) (malformed)")
        }
        let mac = try mac(of: binding(vaultID: vaultID, name: row.name, publicKey: publicKey), master: master)
        return MemberSlotRow(name: row.name, publicKey: row.publicKey, sealedMasterKey: row.sealedMasterKey + mac)
    }

    /// The master key in `row`, when it is sealed to `member`'s key; nil when it is another's.
    /// A slot of this key that is bound to another vault, name or key is an integrity failure;
    /// so is, from format 7 on, one whose MAC does not hold. `format` is the vault's version.
    static func open(_ row: MemberSlotRow, vaultID: [UInt8], member: MemberKey, format: Int) throws(VaultError) -> SecureBuffer? {
        guard row.publicKey == member.publicKey.bytes else { return nil }
        let bound = binding(vaultID: vaultID, name: row.name, publicKey: member.publicKey)
        let count = KeyDerivation.masterKeyBytes + bound.count
        var plain = try SecureBuffer(capacity: count)
        let name = String(decoding: row.name, as: UTF8.self)
        let hasMAC = format >= VaultFormat.oldestWithMemberSlotMACs
        guard !hasMAC || row.sealedMasterKey.count > macBytes,
              member.openSealedBox(hasMAC ? Array(row.sealedMasterKey.dropLast(macBytes)) : row.sealedMasterKey, count: count, into: &plain) else {
            throw .integrityFailure("member slot \(name)")
        }
        let matches = plain.withUnsafeBytes { bytes in
            bound.withUnsafeBytes { sodium_memcmp(bytes.baseAddress! + KeyDerivation.masterKeyBytes, $0.baseAddress!, bound.count) == 0 }
        }
        guard matches else { throw .integrityFailure("member slot \(name) (bound to another vault, name or key)") }
        let master = try plain.withUnsafeBytes { (bytes) throws(VaultError) in
            try SecureBuffer(copying: UnsafeRawBufferPointer(rebasing: bytes.prefix(KeyDerivation.masterKeyBytes)))
        }
        if hasMAC { try check(row, vaultID: vaultID, master: master) }
        return master
    }
}
