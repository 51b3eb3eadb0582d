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
    /// Unlocked, each member slot's MAC is checked as well: a row added by someone who may write
    /// the tables but holds no key is an integrity failure, never listed as a member.
    public func keySlots() throws(VaultError) -> [VaultKeySlot] {
        do throws(VaultError) {
            return try reading { (store) throws(VaultError) -> [VaultKeySlot] in
                // A slot put back (a removed member's) fails the members' MAC, even with its own MAC.
                if try store.hasCheckableState { _ = try store.checkedState() }
                return try store.cipher.withMasterKey { (master) throws(VaultError) -> [VaultKeySlot] in
                    try Vault.keySlots(in: store.storage) { (row) throws(VaultError) in
                        try MemberSlot.check(row, vaultID: store.cipher.vaultID, master: master)
                    }
                }
            }
        } catch .locked {
            return try withStorage { (storage) throws(VaultError) -> [VaultKeySlot] in
                try storage.read { () throws(VaultError) -> [VaultKeySlot] in try Vault.keySlots(in: storage) { _ in } }
            }
        }
    }

    private static func keySlots(in storage: any VaultStorage,
                                 checking check: (MemberSlotRow) throws(VaultError) -> Void) throws(VaultError) -> [VaultKeySlot] {
        var slots = try storage.keySlots().map { VaultKeySlot.passphrase(id: $0.id) }
        // A vault opened locked may not be upgraded yet: it has no member slots.
        guard try storage.formatVersion() >= VaultFormat.oldestWithMembers else { return slots }
        for row in try storage.memberSlots() {
            guard let key = MemberPublicKey(bytes: row.publicKey) else {
                throw .integrityFailure("member slot (malformed public key)")
            }
            try check(row)
            slots.append(.member(name: String(decoding: row.name, as: UTF8.self), publicKey: key))
        }
        return slots
    }

    /// Wraps the master key to `publicKey` in a new slot named `name`. Needs the vault unlocked
    /// (by a passphrase or a member). A name or key that already has a slot is `.alreadyExists`;
    /// a vault holding this-device-only items or defaults is refused (`.thisDeviceOnlyInTeamVault`).
    public func addMember(name: String, publicKey: MemberPublicKey) throws(VaultError) {
        let nameBytes = try Vault.checkedMemberName(name)
        try writing { (store) throws(VaultError) in
            try refusePINSlotForMembers(store.storage)
            let (items, defaults) = try store.thisDeviceOnlyCounts()
            guard items == 0 && defaults == 0 else {
                throw .thisDeviceOnlyInTeamVault("the vault holds \(items) this-device-only item(s) and \(defaults) dictionary "
                    + "default(s) of that class, which a vault with members cannot keep (another member's machine could not "
                    + "read them): change their class (`keychainfs class`) or export them first")
            }
            let slot = try store.cipher.withMasterKey { (master) throws(VaultError) -> MemberSlotRow in
                try MemberSlot.seal(master: master, vaultID: store.cipher.vaultID, name: nameBytes, publicKey: publicKey)
            }
            if try store.hasCheckableState { _ = try store.checkedState() }
            try store.storage.insertMemberSlot(slot)
            try store.resealMembersMAC()
            try appendAccessLog([Vault.ownChange(.memberAddition, member: name)], in: store)
        }
    }

    /// Deletes the member's slot and rotates the master key, in one durable transaction: every
    /// record is sealed again under a fresh key (`KeyRotation`), every other member's slot
    /// wraps the new key, and the passphrase slot this vault was opened with is rewrapped with
    /// `passphrase` (the one it was opened with). Every other passphrase slot is deleted: it
    /// wraps the old key, under a passphrase the removed member may know. So the removed member,
    /// with a copy of their slot or of the old master key, opens nothing written from now on.
    /// Refused when no way in would be left (`.noKeySlotLeft`).
    public func removeMember(name: String, passphrase: borrowing SecureBuffer) throws(VaultError) -> MemberRemoval {
        try removeMember(name: name, keepingOpenedSlot: true) { (master, slot) throws(VaultError) in
            try Vault.sealKeySlot(master: master, passphrase: passphrase, parameters: slot.parameters, slotID: slot.id)
        }
    }

    /// The same for a vault opened by a member (or without the passphrase at hand): every
    /// passphrase slot is deleted.
    public func removeMember(name: String) throws(VaultError) -> MemberRemoval {
        try removeMember(name: name, keepingOpenedSlot: false) { (_, slot) throws(VaultError) in slot }
    }

    /// `rewrapping` seals the kept slot (the one this vault was opened with) under the new key.
    private func removeMember(name: String, keepingOpenedSlot: Bool,
                              rewrapping: (borrowing SecureBuffer, KeySlotRow) throws(VaultError) -> KeySlotRow)
        throws(VaultError) -> MemberRemoval {
        let nameBytes = try Vault.checkedMemberName(name)
        return try rotatingKeys { (store, openedSlot) throws(VaultError) -> (MemberRemoval, RecordCipher) in
            let storage = store.storage
            return try storage.write(.durable) { () throws(VaultError) -> (MemberRemoval, RecordCipher) in
                if try store.hasCheckableState { _ = try store.checkedState() }
                let members = try storage.memberSlots()
                guard members.contains(where: { $0.name == nameBytes }) else { throw .noSuchMember(name) }
                let kept = members.filter { $0.name != nameBytes }
                let passphraseSlots = try storage.keySlots()
                let rewrapped = keepingOpenedSlot ? passphraseSlots.first { $0.id == openedSlot } : nil
                guard !kept.isEmpty || rewrapped != nil else { throw .noKeySlotLeft(name) }
                try store.cipher.withMasterKey { (master) throws(VaultError) in
                    for slot in kept { try MemberSlot.check(slot, vaultID: store.cipher.vaultID, master: master) }
                }

                let master = try KeyDerivation.randomMasterKey()
                let rotated = try RecordCipher(vaultID: store.cipher.vaultID, master: master)
                let counts = try KeyRotation(storage: storage, old: store.cipher, new: rotated).resealEverything()
                guard try storage.deleteMemberSlot(named: nameBytes) else { throw .noSuchMember(name) }
                for slot in kept {
                    guard let publicKey = MemberPublicKey(bytes: slot.publicKey) else {
                        throw .integrityFailure("member slot (malformed public key)")
                    }
                    // Replaced, not updated: the row is the same name and key with a new box.
                    try storage.deleteMemberSlot(named: slot.name)
                    try storage.insertMemberSlot(MemberSlot.seal(master: master, vaultID: rotated.vaultID, name: slot.name,
                                                                 publicKey: publicKey))
                }
                try storage.setMembersMAC(rotated.membersMAC(try storage.memberSlots()))
                // The generation this write raises is sealed under the new key.
                storage.generationCipher = rotated
                var dropped = 0
                for slot in passphraseSlots {
                    if slot.id == rewrapped?.id {
                        try storage.upsertKeySlot(rewrapping(master, slot))
                    } else {
                        try storage.deleteKeySlot(id: slot.id)
                        dropped += 1
                    }
                }
                // In the team log, sealed to the new key: when the removal happened is what says
                // which items changed since (`itemsToRotate`).
                try AccessLogKeys(cipher: rotated).sealer.append([Vault.ownChange(.memberRemoval, member: name)], to: storage,
                                                                 bounds: .default, signer: store.signer)
                let removal = MemberRemoval(recordsResealed: counts.total,
                                            keptMembers: kept.map { String(decoding: $0.name, as: UTF8.self) },
                                            keptPassphraseSlot: rewrapped != nil, droppedPassphraseSlots: dropped)
                return (removal, rotated)
            }
        }
    }

    static func checkedMemberName(_ name: String) throws(VaultError) -> [UInt8] {
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
