import CSodium
import CTPM
import Glibc

/// One conversation with a TPM through tpm2-tss's ESAPI, for the length of one seal or unseal:
/// the storage root key derived again from the owner seed, a session salted to that key
/// (parameters encrypted with a key only this process and that TPM know, so a secret never
/// crosses the bus in clear), and everything flushed from the TPM when it ends.
package final class TPMConnection {
    /// What `KEYCHAINFS_TCTI` names (tpm2-tss's syntax, `swtpm:host=...,port=...`; `none`: no
    /// TPM, whatever the machine has), else the kernel's resource manager when the machine has
    /// one, else nil: no TPM.
    package static var configuration: String? {
        if let named = getenv("KEYCHAINFS_TCTI").map({ String(cString: $0) }), !named.isEmpty { return named == "none" ? nil : named }
        return access("/dev/tpmrm0", F_OK) == 0 ? "device:/dev/tpmrm0" : nil
    }

    /// The most a sealed data object holds (TPM2B_SENSITIVE_DATA).
    package static let largestSecret = 128

    private var tcti: OpaquePointer?
    private(set) var context: OpaquePointer?
    /// Transient objects and sessions to flush, newest last.
    var loaded: [ESYS_TR] = []

    /// Connects; `.unreachable` when nothing answers there (no device, nothing listening).
    package init(configuration: String) throws(TPMFailure) {
        // Secrets pass through sodium_malloc'd memory, which needs libsodium initialised
        // (idempotent; a caller that never touched a vault may not have).
        guard sodium_init() >= 0 else { throw .failed("libsodium cannot be initialised") }
        guard Tss2_TctiLdr_Initialize(configuration, &tcti) == 0, tcti != nil else { throw .unreachable(configuration) }
        guard Esys_Initialize(&context, tcti, nil) == 0, context != nil else {
            Tss2_TctiLdr_Finalize(&tcti)
            throw .unreachable(configuration)
        }
    }

    deinit {
        for handle in loaded.reversed() { _ = Esys_FlushContext(context, handle) }
        Esys_Finalize(&context)
        Tss2_TctiLdr_Finalize(&tcti)
    }

    /// Seals `secret` in a new sealed data object under this TPM's storage root key: its public
    /// and private areas as the TPM marshals them (TPM2B_PUBLIC then TPM2B_PRIVATE), which only
    /// this TPM can load again.
    package func seal(_ secret: UnsafeRawBufferPointer) throws(TPMFailure) -> [UInt8] {
        try create(secret, template: TPMTemplate.sealedData, authValue: nil)
    }

    /// Creates a sealed data object of `template` holding `secret`, its authorization value
    /// `authValue` (nil: empty), sent through a salted session with the command encrypted.
    func create(_ secret: UnsafeRawBufferPointer, template: TPM2B_PUBLIC, authValue: UnsafeRawBufferPointer?) throws(TPMFailure) -> [UInt8] {
        precondition(secret.count <= TPMConnection.largestSecret, "a sealed data object holds at most 128 bytes")
        precondition((authValue?.count ?? 0) <= 32, "an authorization value is at most a SHA-256 digest")
        let parent = try storageRootKey()
        let session = try saltedSession(to: parent)
        try check(Esys_TRSess_SetAttributes(context, session, TPMTemplate.sessionContinue | TPMTemplate.sessionDecrypt, 0xff), "session")
        // The secret's one copy on this side, in locked memory wiped when freed.
        guard let sensitive = sodium_malloc(MemoryLayout<TPM2B_SENSITIVE_CREATE>.size)?
            .bindMemory(to: TPM2B_SENSITIVE_CREATE.self, capacity: 1) else { throw .failed("out of locked memory") }
        defer { sodium_free(sensitive) }
        sodium_memzero(sensitive, MemoryLayout<TPM2B_SENSITIVE_CREATE>.size)
        sensitive.pointee.sensitive.data.size = UInt16(secret.count)
        let data = UnsafeMutableRawPointer(sensitive) + MemoryLayout<TPM2B_SENSITIVE_CREATE>.offset(of: \.sensitive.data.buffer)!
        data.copyMemory(from: secret.baseAddress!, byteCount: secret.count)
        if let authValue, authValue.count > 0 {
            sensitive.pointee.sensitive.userAuth.size = UInt16(authValue.count)
            let auth = UnsafeMutableRawPointer(sensitive) + MemoryLayout<TPM2B_SENSITIVE_CREATE>.offset(of: \.sensitive.userAuth.buffer)!
            auth.copyMemory(from: authValue.baseAddress!, byteCount: authValue.count)
        }
        var template = template
        var outside = TPM2B_DATA()
        var pcrs = TPML_PCR_SELECTION()
        var privatePart: UnsafeMutablePointer<TPM2B_PRIVATE>?
        var publicPart: UnsafeMutablePointer<TPM2B_PUBLIC>?
        defer {
            Esys_Free(privatePart)
            Esys_Free(publicPart)
        }
        try check(Esys_Create(context, parent, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), sensitive, &template, &outside,
                              &pcrs, &privatePart, &publicPart, nil, nil, nil), "Create")
        guard let privatePart, let publicPart else { throw .failed("Create returned nothing") }
        var blob = [UInt8](repeating: 0, count: MemoryLayout<TPM2B_PUBLIC>.size + MemoryLayout<TPM2B_PRIVATE>.size)
        var offset = 0
        let marshalled = blob.withUnsafeMutableBufferPointer { out in
            Tss2_MU_TPM2B_PUBLIC_Marshal(publicPart, out.baseAddress, out.count, &offset) == 0
                && Tss2_MU_TPM2B_PRIVATE_Marshal(privatePart, out.baseAddress, out.count, &offset) == 0
        }
        guard marshalled else { throw .failed("cannot marshal the sealed object") }
        return Array(blob.prefix(offset))
    }

    /// Unseals what `seal` returned into `destination` (locked memory of the caller's), through
    /// an encrypted response; the TPM's response buffer is wiped before it is freed. Returns the
    /// number of bytes written; `.otherTPM` when the object was made under another TPM.
    package func unseal(_ blob: [UInt8], into destination: UnsafeMutableRawBufferPointer) throws(TPMFailure) -> Int {
        let (parent, object, session) = try load(blob)
        try check(Esys_TRSess_SetAttributes(context, session, TPMTemplate.sessionContinue | TPMTemplate.sessionEncrypt, 0xff), "session")
        return try unseal(object, parent: parent, session: session, into: destination)
    }

    /// Loads what `seal` or `create` returned under the storage root key: the parent, the
    /// object, and the salted HMAC session used (to flush with the rest).
    func load(_ blob: [UInt8]) throws(TPMFailure) -> (parent: ESYS_TR, object: ESYS_TR, session: ESYS_TR) {
        var publicPart = TPM2B_PUBLIC()
        var privatePart = TPM2B_PRIVATE()
        var offset = 0
        let unmarshalled = blob.withUnsafeBufferPointer { bytes in
            Tss2_MU_TPM2B_PUBLIC_Unmarshal(bytes.baseAddress, bytes.count, &offset, &publicPart) == 0
                && Tss2_MU_TPM2B_PRIVATE_Unmarshal(bytes.baseAddress, bytes.count, &offset, &privatePart) == 0
        }
        guard unmarshalled, offset == blob.count else { throw .failed("not a sealed object (TPM2B_PUBLIC, TPM2B_PRIVATE)") }
        let parent = try storageRootKey()
        let session = try saltedSession(to: parent)
        try check(Esys_TRSess_SetAttributes(context, session, TPMTemplate.sessionContinue, 0xff), "session")
        var object = ESYS_TR(ESYS_TR_NONE)
        let status = Esys_Load(context, parent, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &privatePart, &publicPart, &object)
        // The private area's outer HMAC is keyed from the parent's seed: another TPM's storage
        // root key (or an altered blob) fails it.
        if TPMConnection.isIntegrityFailure(status) { throw .otherTPM }
        try check(status, "Load")
        loaded.append(object)
        return (parent, object, session)
    }

    /// Unseals `object` with `session` (which encrypts the response) into `destination`.
    func unseal(_ object: ESYS_TR, parent: ESYS_TR, session: ESYS_TR, into destination: UnsafeMutableRawBufferPointer) throws(TPMFailure) -> Int {
        var data: UnsafeMutablePointer<TPM2B_SENSITIVE_DATA>?
        defer {
            if let data { sodium_memzero(data, MemoryLayout<TPM2B_SENSITIVE_DATA>.size) }
            Esys_Free(data)
        }
        try check(Esys_Unseal(context, object, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &data), "Unseal")
        guard let data else { throw .failed("Unseal returned nothing") }
        let count = Int(data.pointee.size)
        guard count <= destination.count else { throw .failed("the sealed object holds \(count) bytes, more than expected") }
        let bytes = UnsafeRawPointer(data) + MemoryLayout<TPM2B_SENSITIVE_DATA>.offset(of: \.buffer)!
        destination.baseAddress!.copyMemory(from: bytes, byteCount: count)
        overwriteResponseBuffer(with: parent)
        return count
    }

    /// Flushes a transient object or session before the connection ends.
    func flush(_ handle: ESYS_TR) {
        guard let at = loaded.lastIndex(of: handle) else { return }
        loaded.remove(at: at)
        _ = Esys_FlushContext(context, handle)
    }

    /// ESAPI decrypts a response in place, in the one buffer its SAPI context keeps for commands
    /// and responses, and frees that buffer unwiped: the unsealed secret would stay there. The
    /// storage root key's public area and names, read next, are a longer response (about 160
    /// bytes; Unseal's data ends by byte 16 + 128) written over the same bytes.
    private func overwriteResponseBuffer(with key: ESYS_TR) {
        var publicArea: UnsafeMutablePointer<TPM2B_PUBLIC>?
        var name: UnsafeMutablePointer<TPM2B_NAME>?
        var qualifiedName: UnsafeMutablePointer<TPM2B_NAME>?
        _ = Esys_ReadPublic(context, key, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                            &publicArea, &name, &qualifiedName)
        Esys_Free(publicArea)
        Esys_Free(name)
        Esys_Free(qualifiedName)
    }

    /// The storage root key, derived again from the owner hierarchy's seed (owner authorization
    /// empty, as distributions leave it).
    func storageRootKey() throws(TPMFailure) -> ESYS_TR {
        var sensitive = TPM2B_SENSITIVE_CREATE()
        var template = TPMTemplate.storageRootKey
        var outside = TPM2B_DATA()
        var pcrs = TPML_PCR_SELECTION()
        var primary = ESYS_TR(ESYS_TR_NONE)
        try check(Esys_CreatePrimary(context, ESYS_TR(ESYS_TR_RH_OWNER), ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE),
                                     ESYS_TR(ESYS_TR_NONE), &sensitive, &template, &outside, &pcrs, &primary, nil, nil, nil, nil),
                  "CreatePrimary")
        loaded.append(primary)
        return primary
    }

    /// An HMAC session whose salt is encrypted to `key`: its session key, and so the
    /// parameter encryption, is unknown to whoever watches the bus.
    func saltedSession(to key: ESYS_TR, type: TPM2_SE = TPMTemplate.sessionHMAC) throws(TPMFailure) -> ESYS_TR {
        var symmetric = TPMT_SYM_DEF()
        symmetric.algorithm = TPMTemplate.algorithmAES
        symmetric.keyBits.aes = 128
        symmetric.mode.aes = TPMTemplate.algorithmCFB
        var session = ESYS_TR(ESYS_TR_NONE)
        try check(Esys_StartAuthSession(context, key, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                                        ESYS_TR(ESYS_TR_NONE), nil, type, &symmetric,
                                        TPMTemplate.algorithmSHA256, &session), "StartAuthSession")
        loaded.append(session)
        return session
    }

    func check(_ status: TSS2_RC, _ what: String) throws(TPMFailure) {
        guard status != 0 else { return }
        // The TPM's own codes a PIN seal answers with (format one: whichever handle or session).
        if status >> 16 == 0 {
            let formatOne: TSS2_RC = 0x080
            let lockout: TSS2_RC = 0x921
            let (authFail, badAuth, policyFail): (TSS2_RC, TSS2_RC, TSS2_RC) = (0x00E, 0x022, 0x01D)
            if status == lockout { throw .lockedOut }
            if status & formatOne != 0 && [authFail, badAuth].contains(status & 0x3F) { throw .wrongAuthorization }
            if status & formatOne != 0 && status & 0x3F == policyFail { throw .pcrsChanged }
        }
        throw .failed("\(what): \(String(cString: Tss2_RC_Decode(status)))")
    }

    /// TPM_RC_INTEGRITY from the TPM itself, whichever handle or parameter it names.
    private static func isIntegrityFailure(_ status: TSS2_RC) -> Bool {
        let formatOne: TSS2_RC = 0x080
        let integrity: TSS2_RC = formatOne + 0x01F
        return status >> 16 == 0 && status & formatOne != 0 && (status & 0x3F) + formatOne == integrity
    }
}
