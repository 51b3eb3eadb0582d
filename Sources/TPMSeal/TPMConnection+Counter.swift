import CTPM

/// Monotonic counters in the TPM's NV memory (TPM2_NT_COUNTER): a value that only goes up, kept
/// by the chip, that a copy of any file cannot set back. An index is one caller's when its
/// authPolicy holds the caller's 32-byte tag: nobody satisfies that "policy" (reads and increments
/// use the index's own empty authorization), it only names whose index it is, so a handle taken
/// by someone else's index is passed over rather than shared.
extension TPMConnection {
    /// A counter found or made: its handle and its value.
    package struct Counter: Equatable, Sendable {
        package let handle: UInt32
        package let value: UInt64
    }

    /// How many handles from the preferred one are tried before giving up.
    package static let counterProbes: UInt32 = 8

    // TPMA_NV bits and TPM2_NT_COUNTER (TPM 2.0 Part 2, 13.4).
    private static let authWrite: TPMA_NV = 0x0000_0004
    private static let typeCounter: TPMA_NV = 0x0000_0010
    private static let typeMask: TPMA_NV = 0x0000_00F0
    private static let authRead: TPMA_NV = 0x0004_0000
    private static let noDA: TPMA_NV = 0x0200_0000
    private static let written: TPMA_NV = 0x2000_0000
    private static let counterAttributes = authWrite | typeCounter | authRead | noDA

    // Response codes (format zero, TPM layer).
    private static let nvSpace: TSS2_RC = 0x14B
    private static let nvDefined: TSS2_RC = 0x14C

    /// The counter tagged `tag` at `preferred` or one of the next handles, nil when none is.
    /// Its value is nil while it was never incremented.
    package func findCounter(tag: [UInt8], preferred: UInt32) throws(TPMFailure) -> (handle: UInt32, value: UInt64?)? {
        for offset in 0..<TPMConnection.counterProbes {
            let handle = preferred &+ offset
            guard let (index, attributes, ours) = try openIndex(handle, tag: tag) else { continue }
            defer { close(index) }
            guard ours else { continue }
            guard attributes & TPMConnection.written != 0 else { return (handle, nil) }
            return (handle, try read(index))
        }
        return nil
    }

    /// The counter tagged `tag`, made at the first free handle from `preferred` when there is
    /// none, and incremented once if it never was (a counter's first value is the largest any
    /// counter of this TPM ever held, so it is known only then). `.full` when the TPM has no NV
    /// space left (or every handle tried is someone else's).
    package func counter(tag: [UInt8], preferred: UInt32) throws(TPMFailure) -> Counter {
        precondition(tag.count == 32, "a counter's tag is a SHA-256-sized digest")
        if let (handle, value) = try findCounter(tag: tag, preferred: preferred) {
            if let value { return Counter(handle: handle, value: value) }
            return Counter(handle: handle, value: try increment(handle: handle))
        }
        for offset in 0..<TPMConnection.counterProbes {
            let handle = preferred &+ offset
            var auth = TPM2B_AUTH()
            var info = TPM2B_NV_PUBLIC()
            info.nvPublic.nvIndex = handle
            info.nvPublic.nameAlg = TPMTemplate.algorithmSHA256
            info.nvPublic.attributes = TPMConnection.counterAttributes
            info.nvPublic.dataSize = 8
            info.nvPublic.authPolicy.size = 32
            withUnsafeMutableBytes(of: &info.nvPublic.authPolicy.buffer) { $0.copyBytes(from: tag) }
            var index = ESYS_TR(ESYS_TR_NONE)
            let status = Esys_NV_DefineSpace(context, ESYS_TR(ESYS_TR_RH_OWNER), ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE),
                                             ESYS_TR(ESYS_TR_NONE), &auth, &info, &index)
            if status == TPMConnection.nvDefined { continue }
            if status == TPMConnection.nvSpace { throw .full }
            try check(status, "NV_DefineSpace")
            close(index)
            return Counter(handle: handle, value: try increment(handle: handle))
        }
        throw .full
    }

    /// Raises the counter at `handle` by one; its new value.
    package func increment(handle: UInt32) throws(TPMFailure) -> UInt64 {
        var index = ESYS_TR(ESYS_TR_NONE)
        try check(Esys_TR_FromTPMPublic(context, handle, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &index),
                  "NV index \(hex(handle))")
        defer { close(index) }
        try check(Esys_NV_Increment(context, index, index, ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE)),
                  "NV_Increment")
        return try read(index)
    }

    /// The index at `handle` (to close), its attributes, and whether it is a counter tagged `tag`;
    /// nil when no index is there.
    private func openIndex(_ handle: UInt32, tag: [UInt8]) throws(TPMFailure) -> (ESYS_TR, TPMA_NV, Bool)? {
        var index = ESYS_TR(ESYS_TR_NONE)
        guard Esys_TR_FromTPMPublic(context, handle, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &index) == 0
        else { return nil }
        var info: UnsafeMutablePointer<TPM2B_NV_PUBLIC>?
        var name: UnsafeMutablePointer<TPM2B_NAME>?
        defer {
            Esys_Free(info)
            Esys_Free(name)
        }
        let status = Esys_NV_ReadPublic(context, index, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &info, &name)
        guard status == 0, let info else {
            close(index)
            try check(status, "NV_ReadPublic \(hex(handle))")
            throw .failed("NV_ReadPublic returned nothing")
        }
        let nv = info.pointee.nvPublic
        let policy = withUnsafeBytes(of: nv.authPolicy.buffer) { Array($0.prefix(Int(nv.authPolicy.size))) }
        let ours = nv.attributes & ~TPMConnection.written == TPMConnection.counterAttributes && nv.attributes & TPMConnection.typeMask
            == TPMConnection.typeCounter && policy == tag
        return (index, nv.attributes, ours)
    }

    private func read(_ index: ESYS_TR) throws(TPMFailure) -> UInt64 {
        var data: UnsafeMutablePointer<TPM2B_MAX_NV_BUFFER>?
        defer { Esys_Free(data) }
        try check(Esys_NV_Read(context, index, index, ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), 8, 0, &data),
                  "NV_Read")
        guard let data, data.pointee.size == 8 else { throw .failed("NV_Read returned no 8-byte counter") }
        // A counter is marshalled big-endian.
        return withUnsafeBytes(of: data.pointee.buffer) { bytes in bytes.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
    }

    private func close(_ index: ESYS_TR) {
        var index = index
        _ = Esys_TR_Close(context, &index)
    }

    private func hex(_ handle: UInt32) -> String { "0x" + String(handle, radix: 16) }
}
