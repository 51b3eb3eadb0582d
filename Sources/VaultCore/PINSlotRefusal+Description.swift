extension PINSlotRefusal: CustomStringConvertible {
    /// Each names why and what to do, the passphrase first: it is the recovery whatever the TPM says.
    public var description: String {
        let recovery = "open the vault with its passphrase"
        return switch self {
        case .lockedOut:
            "the TPM refuses PINs for now (its dictionary-attack lockout, after too many wrong ones): \(recovery); "
                + "the TPM takes PINs again once its recovery time has passed"
        case .pcrsChanged:
            "the TPM PIN slot is bound to PCRs that changed since it was made (a firmware, boot loader or Secure Boot "
                + "update): \(recovery), then enrol the PIN again (`keychainfs tpm-pin remove`, `keychainfs tpm-pin add`)"
        case .otherTPM:
            "the TPM PIN slot was sealed by another machine's TPM (the vault was copied here): \(recovery)"
                + " (`keychainfs tpm-pin remove` and `tpm-pin add` enrol this machine's)"
        case .noTPM(let configuration):
            (configuration.map { "no TPM answers at \($0)" } ?? "this machine has no TPM (no /dev/tpmrm0, no KEYCHAINFS_TCTI)")
                + " for the TPM PIN slot: \(recovery)"
        case .noSlot:
            "the vault has no TPM PIN slot (`keychainfs tpm-pin add` makes one): \(recovery)"
        }
    }
}
