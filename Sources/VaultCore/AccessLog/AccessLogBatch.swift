import CSodium

/// The plaintext of one sealed batch, built and read in locked memory:
///
///     vault id (16) | sequence (8) | sealing scheme (1) | purpose (1) | entry count (4) | entries
///
/// each entry: seconds (8), nanoseconds (4), pid (4), access (1), decision (1), node id (8, 0 for
/// none), then executable, unit, reason and path, each a 4-byte length (0xFFFFFFFF for none) and
/// its bytes; the path is its names joined by '/' (none of them can hold one). All integers are
/// little-endian. The whole is padded (libsodium's ISO/IEC 7816-4 padding) to `block` bytes.
///
/// Why the vault id and sequence lead: a sealed box takes no associated data, so the place a
/// batch belongs to is sealed inside it, and `decode` refuses a batch found anywhere else (a row
/// copied to another sequence, or from another vault sealed to the same key).
///
/// From format 11 batches are chained (purpose `chainedAccessLog`): after the entry count come
/// the digest of the batch before (32 bytes, zeros for the first), 16 random bytes (so that the
/// digest, kept in clear, is no oracle for guesses of a batch's entries), the signer's name (a 1-byte
/// length, 0 for an unsigned batch, then the member's name) and, when signed, the member's
/// Ed25519 key (32); after the entries, the signature (64) of everything before it. The digest
/// of a batch is BLAKE2b-256 of that unpadded plaintext, signature included: the next batch
/// names it, and the row keeps it in front of the sealed box (`AccessLogKeys`), so an appender
/// that holds only the log's public key can chain on, and a re-sealing at a key rotation, which
/// keeps the plaintext, keeps every digest and signature.
enum AccessLogBatch {
    /// Ciphertexts reveal only the size of a batch in these steps (the entry count is in clear).
    static let block = 256
    private static let headerBytes = VaultFormat.vaultIDBytes + 8 + 1 + 1 + 4
    private static let fixedEntryBytes = 8 + 4 + 4 + 1 + 1 + 8 + 4 * 4
    private static let none = UInt32.max
    static let digestBytes = 32
    private static let saltBytes = 16
    private static let signingKeyBytes = Int(crypto_sign_publickeybytes())

    /// What a chained batch says beyond its entries.
    struct Chain {
        /// The digest of the batch before; zeros for the first.
        let previous: [UInt8]
        /// The signer's name and Ed25519 key; nil for an unsigned batch.
        let signer: (name: [UInt8], key: [UInt8])?
    }

    /// A chained batch that opened: its entries, its chain and its own digest.
    struct Opened {
        let entries: [AccessLogEntry]
        let chain: Chain?
        let digest: [UInt8]?
    }

    /// The row's bytes of `entries` as chained batch `sequence` of `vaultID`, signed by `signer`
    /// when there is one and sealed to `sealer`: the digest, then the box. And the digest.
    static func sealChained(_ entries: [AccessLogEntry], vaultID: [UInt8], sequence: Int64, previous: [UInt8],
                            signer: LogSigner?, to sealer: AccessLogSealer) throws(VaultError) -> (sealed: [UInt8], digest: [UInt8]) {
        precondition(previous.count == digestBytes, "a batch digest of the wrong size")
        let signing = signer.flatMap { signer in signer.key.publicKey.signingKey.map { (signer, $0) } }
        var size = headerBytes + digestBytes + saltBytes + 1 + entriesBytes(entries, chained: true)
        if let (signer, _) = signing { size += signer.name.count + signingKeyBytes + MemberKey.signatureBytes }
        let padded = size + block - size % block
        var plain = try SecureBuffer(capacity: padded)
        try appendHeader(to: &plain, vaultID: vaultID, sequence: sequence, purpose: RecordCipher.chainedAccessLogPurpose, count: entries.count)
        try plain.append(contentsOf: previous)
        try plain.append(contentsOf: randomBytes(saltBytes))
        try plain.appendInteger(UInt64(signing?.0.name.count ?? 0), width: 1)
        if let (signer, key) = signing {
            try plain.append(contentsOf: signer.name)
            try plain.append(contentsOf: key)
        }
        try appendEntries(entries, to: &plain, chained: true)
        if let (signer, _) = signing {
            guard let signature = plain.withUnsafeBytes({ signer.key.sign($0) }) else { preconditionFailure("a signer that cannot sign") }
            try plain.append(contentsOf: signature)
        }
        precondition(plain.count == size, "access log batch size miscounted")
        let digest = plain.withUnsafeBytes { AccessLogBatch.digest(of: $0) }
        pad(&plain, size: size, padded: padded)
        return (digest + sealer.seal(plain), digest)
    }

    /// BLAKE2b-256 of a batch's unpadded plaintext.
    static func digest(of bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: digestBytes)
        _ = crypto_generichash(&digest, digestBytes, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(bytes.count), nil, 0)
        return digest
    }

    private static func entriesBytes(_ entries: [AccessLogEntry], chained: Bool) -> Int {
        var size = 0
        for entry in entries {
            if chained { size += 4 + (entry.aboutMember?.utf8.count ?? 0) }
            size += fixedEntryBytes + (entry.executable?.utf8.count ?? 0) + (entry.unit?.utf8.count ?? 0) + reason(entry.decision).map(\.utf8.count).orZero
            if let path = entry.path { size += pathBytes(path) }
        }
        return size
    }

    private static func appendHeader(to plain: inout SecureBuffer, vaultID: [UInt8], sequence: Int64, purpose: UInt8,
                                     count: Int) throws(VaultError) {
        for byte in vaultID { try plain.appendInteger(UInt64(byte), width: 1) }
        try plain.appendInteger(UInt64(bitPattern: sequence), width: 8)
        try plain.appendInteger(UInt64(RecordCipher.sealingScheme), width: 1)
        try plain.appendInteger(UInt64(purpose), width: 1)
        try plain.appendInteger(UInt64(count), width: 4)
    }

    private static func pad(_ plain: inout SecureBuffer, size: Int, padded: Int) {
        var paddedCount = 0
        var rc: Int32 = -1
        plain.withUnsafeMutableStorage { storage in
            rc = sodium_pad(&paddedCount, storage.baseAddress!.assumingMemoryBound(to: UInt8.self), size, block, storage.count)
            return rc == 0 ? paddedCount : size
        }
        precondition(rc == 0 && paddedCount == padded, "sodium_pad failed")
    }

    /// The padded plaintext of `entries` as (unchained) batch `sequence` of vault `vaultID`: what
    /// a vault of format 10 or older, opened locked and so not upgraded yet, is appended.
    static func encode(_ entries: [AccessLogEntry], vaultID: [UInt8], sequence: Int64) throws(VaultError) -> SecureBuffer {
        let size = headerBytes + entriesBytes(entries, chained: false)
        let padded = size + block - size % block
        var plain = try SecureBuffer(capacity: padded)
        try appendHeader(to: &plain, vaultID: vaultID, sequence: sequence, purpose: RecordCipher.accessLogPurpose, count: entries.count)
        try appendEntries(entries, to: &plain, chained: false)
        precondition(plain.count == size, "access log batch size miscounted")
        pad(&plain, size: size, padded: padded)
        return plain
    }

    /// Each entry as the layout says; a chained batch's entries end in the member a membership
    /// change was about (a 4-byte length and the name, 0xFFFFFFFF for none).
    private static func appendEntries(_ entries: [AccessLogEntry], to plain: inout SecureBuffer, chained: Bool) throws(VaultError) {
        for entry in entries {
            try plain.appendInteger(UInt64(bitPattern: entry.time.seconds), width: 8)
            try plain.appendInteger(UInt64(entry.time.nanoseconds), width: 4)
            try plain.appendInteger(UInt64(UInt32(bitPattern: entry.pid)), width: 4)
            try plain.appendInteger(UInt64(entry.access.rawValue), width: 1)
            try plain.appendInteger(UInt64(decisionCode(entry.decision)), width: 1)
            try plain.appendInteger(UInt64(bitPattern: entry.node?.rawValue ?? 0), width: 8)
            try plain.appendText(entry.executable)
            try plain.appendText(entry.unit)
            try plain.appendText(reason(entry.decision))
            if let path = entry.path {
                try plain.appendInteger(UInt64(pathBytes(path)), width: 4)
                for (index, name) in path.components.enumerated() {
                    if index > 0 { try plain.appendInteger(0x2F, width: 1) }
                    try name.withUnsafeBytes { (bytes) throws(VaultError) in try plain.append(bytes) }
                }
            } else {
                try plain.appendInteger(UInt64(none), width: 4)
            }
            if chained { try plain.appendText(entry.aboutMember) }
        }
    }

    /// The entries of a padded plaintext, or why it is not batch `sequence` of `vaultID`; a
    /// chained batch's signature is checked against the key it names.
    static func decode(_ plain: borrowing SecureBuffer, vaultID: [UInt8], sequence: Int64) -> Result<Opened, BatchDefect> {
        var unpadded = 0
        let unpaddedOK = plain.withUnsafeBytes { bytes in
            bytes.count > 0 && sodium_unpad(&unpadded, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count, block) == 0
        }
        guard unpaddedOK else { return .failure(.malformed) }
        return plain.withUnsafeBytes { whole in
            let batch = UnsafeRawBufferPointer(rebasing: whole[..<unpadded])
            var reader = Reader(bytes: batch)
            guard let id = reader.bytes(VaultFormat.vaultIDBytes), let storedSequence = reader.integer(8),
                  let scheme = reader.integer(1), let purpose = reader.integer(1), let count = reader.integer(4) else {
                return .failure(.malformed)
            }
            let chained = purpose == UInt64(RecordCipher.chainedAccessLogPurpose)
            guard scheme == UInt64(RecordCipher.sealingScheme), chained || purpose == UInt64(RecordCipher.accessLogPurpose) else {
                return .failure(.malformed)
            }
            guard id.elementsEqual(vaultID) else { return .failure(.otherVault) }
            guard Int64(bitPattern: storedSequence) == sequence else { return .failure(.otherSequence(Int64(bitPattern: storedSequence))) }
            var chain: Chain? = nil
            if chained {
                guard let previous = reader.bytes(digestBytes), reader.bytes(saltBytes) != nil, let nameCount = reader.integer(1) else {
                    return .failure(.malformed)
                }
                var signer: (name: [UInt8], key: [UInt8])? = nil
                if nameCount > 0 {
                    guard let name = reader.bytes(Int(nameCount)), let key = reader.bytes(signingKeyBytes) else { return .failure(.malformed) }
                    signer = (Array(name), Array(key))
                }
                chain = Chain(previous: Array(previous), signer: signer)
            }
            var entries: [AccessLogEntry] = []
            entries.reserveCapacity(Int(min(count, 1 << 20)))
            for _ in 0..<count {
                guard let entry = reader.entry(chained: chained) else { return .failure(.malformed) }
                entries.append(entry)
            }
            if let signer = chain?.signer {
                let signed = UnsafeRawBufferPointer(rebasing: batch[..<reader.offset])
                guard let signature = reader.bytes(MemberKey.signatureBytes) else { return .failure(.malformed) }
                guard MemberKey.verify(signature, of: signed, by: signer.key) else { return .failure(.badSignature) }
            }
            guard reader.isAtEnd else { return .failure(.malformed) }
            return .success(Opened(entries: entries, chain: chain, digest: chained ? digest(of: batch) : nil))
        }
    }

    /// Why a batch that opened is refused.
    enum BatchDefect: Error, Equatable {
        case malformed
        /// A chained batch whose signature is not its named key's.
        case badSignature
        case otherVault
        case otherSequence(Int64)
    }

    /// The names and the '/' between them.
    private static func pathBytes(_ path: VaultPath) -> Int {
        path.components.reduce(0) { $0 + $1.count } + max(0, path.components.count - 1)
    }

    private static func decisionCode(_ decision: LoggedDecision) -> UInt8 {
        switch decision {
        case .allowed: 0
        case .denied: 1
        case .confirmed(true): 2
        case .confirmed(false): 3
        }
    }

    private static func reason(_ decision: LoggedDecision) -> String? {
        if case .denied(let reason) = decision { return reason }
        return nil
    }

    /// Reads a plaintext front to back; every read checks its bounds.
    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        var offset = 0

        var isAtEnd: Bool { offset == bytes.count }

        mutating func bytes(_ count: Int) -> UnsafeRawBufferPointer? {
            guard count >= 0, count <= bytes.count - offset else { return nil }
            defer { offset += count }
            return UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)])
        }

        mutating func integer(_ width: Int) -> UInt64? {
            bytes(width).map { $0.load(at: 0, width: width) }
        }

        /// A length-prefixed field: .some(nil) for none, nil when the batch ends early.
        mutating func field() -> UnsafeRawBufferPointer?? {
            guard let length = integer(4) else { return nil }
            if length == UInt64(AccessLogBatch.none) { return .some(nil) }
            guard let field = bytes(Int(length)) else { return nil }
            return .some(field)
        }

        mutating func text() -> String?? {
            guard let field = field() else { return nil }
            return .some(field.map { String(decoding: $0, as: UTF8.self) })
        }

        mutating func entry(chained: Bool) -> AccessLogEntry? {
            guard let seconds = integer(8), let nanoseconds = integer(4), nanoseconds < 1_000_000_000, let pid = integer(4),
                  let accessCode = integer(1), let access = LoggedAccess(rawValue: UInt8(accessCode)),
                  let decisionCode = integer(1), let node = integer(8),
                  let executable = text(), let unit = text(), let reason = text(), let pathField = field() else { return nil }
            let decision: LoggedDecision
            switch (decisionCode, reason) {
            case (0, nil): decision = .allowed
            case (1, let reason?): decision = .denied(reason: reason)
            case (2, nil): decision = .confirmed(true)
            case (3, nil): decision = .confirmed(false)
            default: return nil
            }
            var path: VaultPath?
            if let pathBytes = pathField {
                var components: [ItemName] = []
                for part in pathBytes.split(separator: 0x2F, omittingEmptySubsequences: false) where !pathBytes.isEmpty {
                    guard let name = try? ItemName(bytes: UnsafeRawBufferPointer(rebasing: part)) else { return nil }
                    components.append(name)
                }
                path = VaultPath(components: components)
            }
            var aboutMember: String? = nil
            if chained {
                guard let about = text() else { return nil }
                aboutMember = about
            }
            return AccessLogEntry(time: Timestamp(seconds: Int64(bitPattern: seconds), nanoseconds: UInt32(nanoseconds)),
                                  pid: Int32(bitPattern: UInt32(truncatingIfNeeded: pid)), executable: executable, unit: unit,
                                  node: node == 0 ? nil : NodeID(Int64(bitPattern: node)), path: path, access: access, decision: decision,
                                  aboutMember: aboutMember)
        }
    }
}

private extension Optional where Wrapped == Int {
    var orZero: Int { self ?? 0 }
}

extension SecureBuffer {
    /// Appends the low `width` bytes of `value`, little-endian.
    mutating func appendInteger(_ value: UInt64, width: Int) throws(VaultError) {
        var little = value.littleEndian
        try Swift.withUnsafeBytes(of: &little) { (bytes) throws(VaultError) in
            try append(UnsafeRawBufferPointer(rebasing: bytes[..<width]))
        }
    }

    /// The bytes of `array`, which holds nothing secret (digests, keys, signatures).
    mutating func append(contentsOf array: [UInt8]) throws(VaultError) {
        let appended = array.withUnsafeBytes { bytes in
            Result<Void, VaultError> { () throws(VaultError) in try append(bytes) }
        }
        try appended.get()
    }

    /// A 4-byte length and the UTF-8 bytes, or 0xFFFFFFFF for nil.
    mutating func appendText(_ text: String?) throws(VaultError) {
        guard var text else { return try appendInteger(UInt64(UInt32.max), width: 4) }
        try appendInteger(UInt64(text.utf8.count), width: 4)
        let appended = text.withUTF8 { bytes in
            Result<Void, VaultError> { () throws(VaultError) in try append(UnsafeRawBufferPointer(bytes)) }
        }
        try appended.get()
    }
}
