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
enum AccessLogBatch {
    /// Ciphertexts reveal only the size of a batch in these steps (the entry count is in clear).
    static let block = 256
    private static let headerBytes = VaultFormat.vaultIDBytes + 8 + 1 + 1 + 4
    private static let fixedEntryBytes = 8 + 4 + 4 + 1 + 1 + 8 + 4 * 4
    private static let none = UInt32.max

    /// The padded plaintext of `entries` as batch `sequence` of vault `vaultID`.
    static func encode(_ entries: [AccessLogEntry], vaultID: [UInt8], sequence: Int64) throws(VaultError) -> SecureBuffer {
        var size = headerBytes
        for entry in entries {
            size += fixedEntryBytes + (entry.executable?.utf8.count ?? 0) + (entry.unit?.utf8.count ?? 0) + reason(entry.decision).map(\.utf8.count).orZero
            if let path = entry.path { size += pathBytes(path) }
        }
        let padded = size + block - size % block
        var plain = try SecureBuffer(capacity: padded)
        for byte in vaultID { try plain.appendInteger(UInt64(byte), width: 1) }
        try plain.appendInteger(UInt64(bitPattern: sequence), width: 8)
        try plain.appendInteger(UInt64(RecordCipher.sealingScheme), width: 1)
        try plain.appendInteger(UInt64(RecordCipher.accessLogPurpose), width: 1)
        try plain.appendInteger(UInt64(entries.count), width: 4)
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
        }
        precondition(plain.count == size, "access log batch size miscounted")
        var paddedCount = 0
        var rc: Int32 = -1
        plain.withUnsafeMutableStorage { storage in
            rc = sodium_pad(&paddedCount, storage.baseAddress!.assumingMemoryBound(to: UInt8.self), size, block, storage.count)
            return rc == 0 ? paddedCount : size
        }
        precondition(rc == 0 && paddedCount == padded, "sodium_pad failed")
        return plain
    }

    /// The entries of a padded plaintext, or why it is not batch `sequence` of `vaultID`.
    static func decode(_ plain: borrowing SecureBuffer, vaultID: [UInt8], sequence: Int64) -> Result<[AccessLogEntry], BatchDefect> {
        var unpadded = 0
        let unpaddedOK = plain.withUnsafeBytes { bytes in
            bytes.count > 0 && sodium_unpad(&unpadded, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count, block) == 0
        }
        guard unpaddedOK else { return .failure(.malformed) }
        return plain.withUnsafeBytes { whole in
            var reader = Reader(bytes: UnsafeRawBufferPointer(rebasing: whole[..<unpadded]))
            guard let id = reader.bytes(VaultFormat.vaultIDBytes), let storedSequence = reader.integer(8),
                  let scheme = reader.integer(1), let purpose = reader.integer(1), let count = reader.integer(4) else {
                return .failure(.malformed)
            }
            guard scheme == UInt64(RecordCipher.sealingScheme), purpose == UInt64(RecordCipher.accessLogPurpose) else {
                return .failure(.malformed)
            }
            guard id.elementsEqual(vaultID) else { return .failure(.otherVault) }
            guard Int64(bitPattern: storedSequence) == sequence else { return .failure(.otherSequence(Int64(bitPattern: storedSequence))) }
            var entries: [AccessLogEntry] = []
            entries.reserveCapacity(Int(min(count, 1 << 20)))
            for _ in 0..<count {
                guard let entry = reader.entry() else { return .failure(.malformed) }
                entries.append(entry)
            }
            guard reader.isAtEnd else { return .failure(.malformed) }
            return .success(entries)
        }
    }

    /// Why a batch that opened is refused.
    enum BatchDefect: Error, Equatable {
        case malformed
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

        mutating func entry() -> AccessLogEntry? {
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
            return AccessLogEntry(time: Timestamp(seconds: Int64(bitPattern: seconds), nanoseconds: UInt32(nanoseconds)),
                                  pid: Int32(bitPattern: UInt32(truncatingIfNeeded: pid)), executable: executable, unit: unit,
                                  node: node == 0 ? nil : NodeID(Int64(bitPattern: node)), path: path, access: access, decision: decision)
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
