import CSodium

/// One way into a vault, as `member list` shows it.
public enum VaultKeySlot: Equatable, Sendable {
    /// A passphrase slot (shared passphrase), by id.
    case passphrase(id: Int64)
    case member(name: String, publicKey: MemberPublicKey)
}

extension Vault {
    /// Member names: what `member add --name` takes and `member remove` finds.
    public static let maximumMemberNameBytes = 64

    /// The vault's key slots, passphrase slots first; needs no key (the file shows them).
    public func keySlots() throws(VaultError) -> [VaultKeySlot] {
        try withStorage { (storage) throws(VaultError) -> [VaultKeySlot] in
            try storage.read { () throws(VaultError) -> [VaultKeySlot] in
                var slots = try storage.keySlots().map { VaultKeySlot.passphrase(id: $0.id) }
                // A vault opened locked may not be upgraded yet: it has no member slots.
                guard try storage.formatVersion() >= VaultFormat.oldestWithMembers else { return slots }
                for row in try storage.memberSlots() {
                    guard let key = MemberPublicKey(bytes: row.publicKey) else {
                        throw .integrityFailure("member slot (malformed public key)")
                    }
                    slots.append(.member(name: String(decoding: row.name, as: UTF8.self), publicKey: key))
                }
                return slots
            }
        }
    }

    /// Wraps the master key to `publicKey` in a new slot named `name`. Needs the vault unlocked
    /// (by a passphrase or a member). A name or key that already has a slot is `.alreadyExists`.
    public func addMember(name: String, publicKey: MemberPublicKey) throws(VaultError) {
        let nameBytes = try Vault.checkedMemberName(name)
        try writing { (store) throws(VaultError) in
            let slot = try store.cipher.withMasterKey { (master) throws(VaultError) -> MemberSlotRow in
                try MemberSlot.seal(master: master, vaultID: store.cipher.vaultID, name: nameBytes, publicKey: publicKey)
            }
            try store.storage.insertMemberSlot(slot)
        }
    }

    /// Deletes the member's slot. The master key is not rotated (yet): whoever kept a copy of
    /// the slot, or the master key itself, still opens the records as they are.
    public func removeMember(name: String) throws(VaultError) {
        let nameBytes = try Vault.checkedMemberName(name)
        try writing { (store) throws(VaultError) in
            guard try store.storage.deleteMemberSlot(named: nameBytes) else { throw .notFound("member \(name)") }
        }
    }

    private static func checkedMemberName(_ name: String) throws(VaultError) -> [UInt8] {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= maximumMemberNameBytes else {
            throw .invalidArgument("a member name is 1 to \(maximumMemberNameBytes) bytes")
        }
        guard !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw .invalidArgument("a member name has no control characters")
        }
        return bytes
    }
}
