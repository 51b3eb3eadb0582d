/// Why the TPM did not seal or unseal: the caller falls back, refuses as another machine, or reports.
package enum TPMFailure: Error, Equatable {
    /// No TPM answers at the configuration named (no device, nothing listening).
    case unreachable(String)
    /// The sealed object was made under another TPM's storage root key (or was altered).
    case otherTPM
    /// The authorization value (the PIN) is wrong; the TPM counted it toward its lockout.
    case wrongAuthorization
    /// The TPM refuses authorizations of dictionary-attack-protected objects for now.
    case lockedOut
    /// The PCRs the object is bound to no longer hold the values it was sealed with.
    case pcrsChanged
    /// The TPM has no NV space left for a counter (or every handle tried is taken by others').
    case full
    /// The TPM answered with an error, or the blob is not a sealed object.
    case failed(String)
}
