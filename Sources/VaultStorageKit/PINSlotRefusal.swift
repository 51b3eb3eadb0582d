/// Why a vault's TPM PIN slot cannot open it here, whatever the PIN: the passphrase still does.
public enum PINSlotRefusal: Equatable, Sendable {
    /// The TPM's dictionary-attack lockout: too many wrong PINs, refused until its recovery time passes.
    case lockedOut
    /// The PCRs the slot is bound to hold other values than when it was made (firmware, Secure Boot).
    case pcrsChanged
    /// The slot was sealed by another TPM: the vault was copied from another machine.
    case otherTPM
    /// No TPM answers: at the configuration named, or none configured and no /dev/tpmrm0 (nil).
    case noTPM(String?)
    /// The vault has no PIN slot (`keychainfs tpm-pin add` makes one).
    case noSlot
}
