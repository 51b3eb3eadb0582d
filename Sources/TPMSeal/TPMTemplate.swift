import CTPM

/// The public areas asked of the TPM, and the numbers of the TPM 2.0 specification (Part 2) that
/// tss2's headers define as casts, which Swift does not import.
enum TPMTemplate {
    static let algorithmAES: TPM2_ALG_ID = 0x0006
    static let algorithmSHA256: TPM2_ALG_ID = 0x000B
    static let algorithmKeyedHash: TPM2_ALG_ID = 0x0008
    static let algorithmNull: TPM2_ALG_ID = 0x0010
    static let algorithmECC: TPM2_ALG_ID = 0x0023
    static let algorithmCFB: TPM2_ALG_ID = 0x0043
    static let curveNISTP256: TPM2_ECC_CURVE = 0x0003
    static let sessionHMAC: TPM2_SE = 0x00
    static let sessionPolicy: TPM2_SE = 0x01
    static let sessionTrial: TPM2_SE = 0x03
    static let sessionContinue: TPMA_SESSION = 0x01
    static let sessionDecrypt: TPMA_SESSION = 0x20
    static let sessionEncrypt: TPMA_SESSION = 0x40

    // TPMA_OBJECT bits.
    private static let fixedTPM: TPMA_OBJECT = 0x0000_0002
    private static let fixedParent: TPMA_OBJECT = 0x0000_0010
    private static let sensitiveDataOrigin: TPMA_OBJECT = 0x0000_0020
    private static let userWithAuth: TPMA_OBJECT = 0x0000_0040
    private static let noDA: TPMA_OBJECT = 0x0000_0400
    private static let restricted: TPMA_OBJECT = 0x0001_0000
    private static let decrypt: TPMA_OBJECT = 0x0002_0000

    /// AES-128-CFB: the storage key's and the sessions' parameter encryption.
    static var aes128CFB: TPMT_SYM_DEF_OBJECT {
        var symmetric = TPMT_SYM_DEF_OBJECT()
        symmetric.algorithm = algorithmAES
        symmetric.keyBits.aes = 128
        symmetric.mode.aes = algorithmCFB
        return symmetric
    }

    /// The TCG's ECC P-256 storage root key template (TCG TPM v2.0 Provisioning Guidance, 7.5.1),
    /// the one systemd and tpm2-tools derive too: the TPM derives the same key from its owner
    /// seed every time, so nothing of it is kept, and another TPM derives another.
    static var storageRootKey: TPM2B_PUBLIC {
        var key = TPM2B_PUBLIC()
        key.publicArea.type = algorithmECC
        key.publicArea.nameAlg = algorithmSHA256
        key.publicArea.objectAttributes = fixedTPM | fixedParent | sensitiveDataOrigin | userWithAuth | noDA | restricted | decrypt
        key.publicArea.parameters.eccDetail.symmetric = aes128CFB
        key.publicArea.parameters.eccDetail.scheme.scheme = algorithmNull
        key.publicArea.parameters.eccDetail.curveID = curveNISTP256
        key.publicArea.parameters.eccDetail.kdf.scheme = algorithmNull
        key.publicArea.unique.ecc.x.size = 32
        key.publicArea.unique.ecc.y.size = 32
        return key
    }

    /// A sealed data object: a keyed hash with no scheme, its data given by the caller, usable
    /// with an empty authorization (the seal is the binding to this TPM, not a password) and
    /// kept out of the dictionary-attack counter.
    static var sealedData: TPM2B_PUBLIC {
        var object = TPM2B_PUBLIC()
        object.publicArea.type = algorithmKeyedHash
        object.publicArea.nameAlg = algorithmSHA256
        object.publicArea.objectAttributes = fixedTPM | fixedParent | userWithAuth | noDA
        object.publicArea.parameters.keyedHashDetail.scheme.scheme = algorithmNull
        return object
    }

    /// A sealed data object opened only through `policy` (PolicyAuthValue, and PolicyPCR when
    /// bound to PCRs): no userWithAuth, so the bare authorization value is not enough, and no
    /// noDA, so every wrong one counts toward the TPM's dictionary-attack lockout.
    static func sealedData(policy: [UInt8]) -> TPM2B_PUBLIC {
        var object = TPM2B_PUBLIC()
        object.publicArea.type = algorithmKeyedHash
        object.publicArea.nameAlg = algorithmSHA256
        object.publicArea.objectAttributes = fixedTPM | fixedParent
        object.publicArea.parameters.keyedHashDetail.scheme.scheme = algorithmNull
        object.publicArea.authPolicy.size = UInt16(policy.count)
        withUnsafeMutableBytes(of: &object.publicArea.authPolicy.buffer) { $0.copyBytes(from: policy) }
        return object
    }
}
