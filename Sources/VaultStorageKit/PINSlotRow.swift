/// A TPM PIN slot (format 10 on): the master key wrapped by a key that takes both a key sealed by
/// this machine's TPM (to the PIN, PolicyAuthValue, and optionally PCRs) and the PIN itself through
/// Argon2id (`PINSlot`). Nothing here is secret on its own: the sealed object opens only in its
/// TPM, with the PIN, and the wrapped key only with what both give.
package struct PINSlotRow {
    package let id: Int64
    /// Argon2id's cost for the PIN, and its salt.
    package let parameters: KDFParameters
    package let salt: [UInt8]
    /// The PCRs (SHA-256 bank) the sealed key is bound to, one bit each (bit n: PCR n); 0 for none.
    package let pcrMask: UInt32
    /// The TPM's sealed data object: TPM2B_PUBLIC then TPM2B_PRIVATE, as tpm2-tss marshals them.
    package let sealedKey: [UInt8]
    package let wrappedMasterKey: [UInt8]

    package init(id: Int64, parameters: KDFParameters, salt: [UInt8], pcrMask: UInt32, sealedKey: [UInt8], wrappedMasterKey: [UInt8]) {
        self.id = id
        self.parameters = parameters
        self.salt = salt
        self.pcrMask = pcrMask
        self.sealedKey = sealedKey
        self.wrappedMasterKey = wrappedMasterKey
    }
}
