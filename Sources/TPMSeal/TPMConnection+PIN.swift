import CSodium
import CTPM

/// A secret sealed to a PIN the TPM rate-limits: a sealed data object whose only way in is its
/// policy, PolicyAuthValue (the PIN's authorization value, HMAC'd with the session's key, never
/// sent) and, when bound to PCRs, PolicyPCR over their values at sealing time (SHA-256 bank).
/// The object is not noDA: each wrong PIN raises the TPM's dictionary-attack counter, and at its
/// limit the TPM refuses every such object until its recovery time has passed (`.lockedOut`).
extension TPMConnection {
    /// Seals `secret` so that `unseal(_:authValue:pcrs:into:)` with the same `authValue` (at
    /// most 32 bytes: the caller's hash of the PIN) and `pcrs` holding the same values opens it.
    package func seal(_ secret: UnsafeRawBufferPointer, authValue: UnsafeRawBufferPointer, pcrs: [Int]) throws(TPMFailure) -> [UInt8] {
        var trial = ESYS_TR(ESYS_TR_NONE)
        var symmetric = TPMT_SYM_DEF()
        symmetric.algorithm = TPMTemplate.algorithmNull
        try check(Esys_StartAuthSession(context, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                                        ESYS_TR(ESYS_TR_NONE), nil, TPMTemplate.sessionTrial, &symmetric, TPMTemplate.algorithmSHA256, &trial),
                  "StartAuthSession (trial)")
        loaded.append(trial)
        try applyPolicy(trial, pcrs: pcrs)
        var digest: UnsafeMutablePointer<TPM2B_DIGEST>?
        defer { Esys_Free(digest) }
        try check(Esys_PolicyGetDigest(context, trial, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &digest),
                  "PolicyGetDigest")
        guard let digest else { throw .failed("PolicyGetDigest returned nothing") }
        let policy = withUnsafeBytes(of: digest.pointee.buffer) { Array($0.prefix(Int(digest.pointee.size))) }
        // A TPM holds few sessions at once (three in swtpm): the trial one goes before Create's.
        flush(trial)
        return try create(secret, template: TPMTemplate.sealedData(policy: policy), authValue: authValue)
    }

    /// Unseals what `seal(_:authValue:pcrs:)` returned. `.wrongAuthorization` for another
    /// authorization value (counted by the TPM), `.lockedOut` while the TPM refuses, `.pcrsChanged`
    /// when the PCRs hold other values than at sealing, `.otherTPM` for another chip's object.
    package func unseal(_ blob: [UInt8], authValue: UnsafeRawBufferPointer, pcrs: [Int],
                        into destination: UnsafeMutableRawBufferPointer) throws(TPMFailure) -> Int {
        precondition(authValue.count <= 32, "an authorization value is at most a SHA-256 digest")
        let (parent, object, _) = try load(blob)
        let session = try saltedSession(to: parent, type: TPMTemplate.sessionPolicy)
        try applyPolicy(session, pcrs: pcrs)
        guard let auth = sodium_malloc(MemoryLayout<TPM2B_AUTH>.size)?.bindMemory(to: TPM2B_AUTH.self, capacity: 1) else {
            throw .failed("out of locked memory")
        }
        sodium_memzero(auth, MemoryLayout<TPM2B_AUTH>.size)
        auth.pointee.size = UInt16(authValue.count)
        (UnsafeMutableRawPointer(auth) + MemoryLayout<TPM2B_AUTH>.offset(of: \.buffer)!)
            .copyMemory(from: authValue.baseAddress!, byteCount: authValue.count)
        defer {
            // ESYS keeps a copy with the object's metadata: an empty one written over it.
            sodium_memzero(auth, MemoryLayout<TPM2B_AUTH>.size)
            _ = Esys_TR_SetAuth(context, object, auth)
            sodium_free(auth)
        }
        try check(Esys_TR_SetAuth(context, object, auth), "TR_SetAuth")
        try check(Esys_TRSess_SetAttributes(context, session, TPMTemplate.sessionContinue | TPMTemplate.sessionEncrypt, 0xff), "session")
        return try unseal(object, parent: parent, session: session, into: destination)
    }

    /// PolicyPCR (when `pcrs` is not empty; the TPM takes their present values) then PolicyAuthValue.
    private func applyPolicy(_ session: ESYS_TR, pcrs: [Int]) throws(TPMFailure) {
        if !pcrs.isEmpty {
            var selection = TPML_PCR_SELECTION()
            selection.count = 1
            selection.pcrSelections.0.hash = TPMTemplate.algorithmSHA256
            selection.pcrSelections.0.sizeofSelect = 3
            withUnsafeMutableBytes(of: &selection.pcrSelections.0.pcrSelect) { bytes in
                for pcr in pcrs {
                    precondition((0..<24).contains(pcr), "a PCR is 0 to 23")
                    bytes[pcr / 8] |= UInt8(1 << (pcr % 8))
                }
            }
            var empty = TPM2B_DIGEST()
            try check(Esys_PolicyPCR(context, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &empty, &selection),
                      "PolicyPCR")
        }
        try check(Esys_PolicyAuthValue(context, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE)),
                  "PolicyAuthValue")
    }
}
