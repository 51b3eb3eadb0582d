/// The TPM PIN slot (format 10 on): a short PIN that opens the vault on this machine only, its
/// guessing stopped by the TPM's dictionary-attack lockout (`PINSlot`). The passphrase slot
/// stays beside it, the way in when the TPM refuses (lockout, PCRs changed, another machine).
/// Not in a vault with members: a member's removal rotates the master key, which a PIN slot
/// could only follow with the PIN at hand, and another member's machine has another TPM.
extension Vault {
    /// Creates a vault whose ways in are `passphrase` and `pin` (sealed by this machine's TPM,
    /// bound to `pcrs` if any). The TPM seals before anything is written: a TPM that refuses
    /// leaves no vault behind.
    public static func create(at path: String, passphrase: borrowing SecureBuffer, pin: borrowing SecureBuffer, pcrs: [Int],
                              kdf: KDFParameters, itemSizeLimit: Int = defaultItemSizeLimit) throws(VaultError) -> Vault {
        guard passphrase.count > 0 else { throw .invalidArgument("the passphrase is empty") }
        guard (1...maximumItemSizeLimit).contains(itemSizeLimit) else {
            throw .invalidArgument("the item size limit must be between 1 and \(maximumItemSizeLimit) bytes")
        }
        try PINSlot.checkPIN(pin)
        let vaultID = randomBytes(VaultFormat.vaultIDBytes)
        let master = try KeyDerivation.randomMasterKey()
        let cipher = try RecordCipher(vaultID: vaultID, master: master)
        let pinSlot = try PINSlot.seal(master: master, pin: pin, pcrs: pcrs, parameters: kdf)
        let slot = try sealKeySlot(master: master, passphrase: passphrase, parameters: kdf, slotID: 1)
        return try create(at: path, vaultID: vaultID, cipher: cipher, itemSizeLimit: itemSizeLimit, slotID: 1) { (storage) throws(VaultError) in
            try storage.upsertKeySlot(slot)
            try storage.upsertPINSlot(pinSlot)
        }
    }

    /// Whether a TPM answers for a PIN slot to be sealed by: checked before any secret is asked.
    public static func checkTPMForPINSlot() throws(VaultError) {
        _ = try PINSlot.connect()
    }

    /// Opens an existing vault with its TPM PIN. `.wrongPIN` (counted by the TPM),
    /// `.pinSlotRefused` when the TPM will not open the slot whatever the PIN.
    public static func open(at path: String, pin: borrowing SecureBuffer, acceptingRollback: Bool = false) throws(VaultError) -> Vault {
        let storage = try VaultLocation.openStorage(at: path)
        let (version, (vaultID, itemSizeLimit, storedMAC)) = try storage.read { () throws(VaultError) in
            (try checkedVersion(of: storage, at: path), try readHeader(storage))
        }
        guard version >= VaultFormat.oldestWithPINSlots, let slot = try storage.pinSlots().first else { throw .pinSlotRefused(.noSlot) }
        let master = try PINSlot.open(slot, pin: pin)
        return try opened(storage, at: path, version: version, vaultID: vaultID, itemSizeLimit: itemSizeLimit, storedMAC: storedMAC,
                          master: master, slotID: pinSlotOpenedID, acceptingRollback: acceptingRollback)
    }

    /// Re-derives the keys with the TPM PIN; a wrong one leaves the vault locked.
    public func unlock(pin: borrowing SecureBuffer) throws(VaultError) {
        guard !opensWithMemberKey else { throw .pinSlotRefused(.noSlot) }
        try adoptKeys(of: try Vault.open(at: path, pin: pin))
    }

    /// Whether the vault has a TPM PIN slot, and the PCRs it is bound to; needs no key.
    public func pinSlotPCRs() throws(VaultError) -> [Int]? {
        try withStorage { (storage) throws(VaultError) -> [Int]? in
            guard try storage.formatVersion() >= VaultFormat.oldestWithPINSlots else { return nil }
            return try storage.pinSlots().first.map { PINSlot.pcrs(of: $0.pcrMask) }
        }
    }

    /// Adds a PIN slot sealed by this machine's TPM (bound to `pcrs` if any). Needs the vault
    /// unlocked; a vault that has one already is `.alreadyExists`, one with members is refused.
    /// The key derivation and the TPM run before the write, which only inserts the row.
    public func addPINSlot(pin: borrowing SecureBuffer, pcrs: [Int], kdf: KDFParameters) throws(VaultError) {
        try PINSlot.checkPIN(pin)
        _ = try PINSlot.mask(of: pcrs)
        try refuseSecondSlotOrMembers()
        let slot = try reading { (store) throws(VaultError) -> PINSlotRow in
            try store.cipher.withMasterKey { (master) throws(VaultError) -> PINSlotRow in
                try PINSlot.seal(master: master, pin: pin, pcrs: pcrs, parameters: kdf)
            }
        }
        try writing { (store) throws(VaultError) in
            try refuseSecondSlotOrMembers(store.storage)
            try store.storage.upsertPINSlot(slot)
        }
    }

    /// Deletes the PIN slot; false when there was none. The sealed object stays in no TPM (it was
    /// never loaded for longer than an unseal), so nothing else is left behind.
    public func removePINSlot() throws(VaultError) -> Bool {
        try writing { (store) throws(VaultError) -> Bool in try store.storage.deletePINSlot(id: PINSlot.id) }
    }

    private func refuseSecondSlotOrMembers() throws(VaultError) {
        try reading { (store) throws(VaultError) in try refuseSecondSlotOrMembers(store.storage) }
    }

    private func refuseSecondSlotOrMembers(_ storage: any VaultStorage) throws(VaultError) {
        guard try storage.memberSlots().isEmpty else {
            throw .invalidArgument("a vault with members takes no TPM PIN slot (another member's machine has another TPM, and "
                + "removing a member changes the key, which the slot could not follow)")
        }
        guard try storage.pinSlots().isEmpty else {
            throw .alreadyExists("the vault's TPM PIN slot (`keychainfs tpm-pin remove` first, to enrol it again)")
        }
    }

    /// Members refuse a vault with a PIN slot (see above); before format 10 there is none.
    func refusePINSlotForMembers(_ storage: any VaultStorage) throws(VaultError) {
        guard try storage.formatVersion() >= VaultFormat.oldestWithPINSlots, try !storage.pinSlots().isEmpty else { return }
        throw .invalidArgument("the vault has a TPM PIN slot, which a vault with members cannot keep: "
            + "remove it first (`keychainfs tpm-pin remove`)")
    }
}
