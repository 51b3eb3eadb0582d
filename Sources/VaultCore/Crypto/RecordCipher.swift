import CSodium

/// Where a record belongs: its node id and the random value drawn when the node was created.
/// Both go into every record's associated data, so records of a deleted node can never be
/// made to pass for a later node, even if an attacker rewinds the id counter.
struct RecordPlace {
    static let incarnationBytes = 16
    let node: NodeID
    let incarnation: [UInt8]

    static func new(_ node: NodeID) -> RecordPlace { RecordPlace(node: node, incarnation: randomBytes(incarnationBytes)) }
}

/// Seals and opens the vault's records. Every box carries associated data naming the vault,
/// the record's purpose, its node and (for names) its parent or (for contents) its content
/// generation or (for a node's attributes) the attribute's tag within the node, so a ciphertext
/// copied, swapped or moved to another row or column fails to open.
final class RecordCipher: Sendable {
    private enum Purpose: UInt8 {
        case keySlot = 1, name = 2, attributes = 3, content = 4, attributeName = 5, attributeValue = 6
        /// Sealed boxes take no associated data: this one goes into the batch's plaintext.
        case accessLog = 8
    }

    /// What an access log batch's plaintext names itself as (see `AccessLogBatch`).
    static let accessLogPurpose = Purpose.accessLog.rawValue

    /// How records are sealed (keys, associated data, header MAC), apart from the format
    /// version: a new format changes what records hold, not how they are sealed, so it stays 1
    /// and every sealed record, key slot and the header MAC keeps its bytes across upgrades.
    /// Changing it would mean re-encrypting every record and rewrapping every key slot.
    static let sealingScheme: UInt8 = 1
    static let formatTag: [UInt8] = Array("KCFS".utf8) + [sealingScheme]
    /// Names are padded to a multiple of this, so ciphertexts reveal only a length bucket.
    static let nameBlock = 64
    /// Contents are padded to the next power of two at or above this.
    static let smallestContentBucket = 64

    let vaultID: [UInt8]
    private let keys: VaultKeys
    /// Kept so a passphrase change can rewrap it; wiped with the subkeys when this is released.
    private let master: SecureBuffer

    init(vaultID: [UInt8], master: borrowing SecureBuffer) throws(VaultError) {
        self.vaultID = vaultID
        keys = try VaultKeys(master: master)
        self.master = try master.withUnsafeBytes { (bytes) throws(VaultError) in try SecureBuffer(copying: bytes) }
    }

    func withMasterKey<R: ~Copyable, E: Error>(_ body: (borrowing SecureBuffer) throws(E) -> R) throws(E) -> R {
        try body(master)
    }

    private static func associatedData(_ purpose: Purpose, vaultID: [UInt8], subject: Int64, binding: UInt64) -> [UInt8] {
        var ad = formatTag
        ad.append(purpose.rawValue)
        ad += vaultID
        ad.appendLittleEndian(UInt64(bitPattern: subject))
        ad.appendLittleEndian(binding)
        return ad
    }

    private func associatedData(_ purpose: Purpose, _ place: RecordPlace, binding: UInt64) -> [UInt8] {
        RecordCipher.associatedData(purpose, vaultID: vaultID, subject: place.node.rawValue, binding: binding) + place.incarnation
    }

    // MARK: key slots (sealed with a passphrase-derived key, not with the vault keys)

    static func slotAssociatedData(slotID: Int64, parameters: KDFParameters) -> [UInt8] {
        // The vault id is left out on purpose: it is authenticated by the header MAC once the
        // key is unwrapped, so an edited id reads as tampering, not as a wrong passphrase.
        var ad = associatedData(.keySlot, vaultID: [], subject: slotID, binding: UInt64(bitPattern: parameters.algorithm))
        ad.appendLittleEndian(parameters.opsLimit)
        ad.appendLittleEndian(parameters.memLimit)
        return ad
    }

    // MARK: header

    func headerMACMatches(_ stored: [UInt8], itemSizeLimit: Int) -> Bool {
        let expected = headerMAC(itemSizeLimit: itemSizeLimit)
        return stored.count == expected.count && sodium_memcmp(stored, expected, expected.count) == 0
    }

    func headerMAC(itemSizeLimit: Int) -> [UInt8] {
        var message = RecordCipher.formatTag + Array("header".utf8) + vaultID
        message.appendLittleEndian(UInt64(VaultFormat.applicationID))
        message.appendLittleEndian(UInt64(itemSizeLimit))
        return VaultKeys.keyedHash(message, key: keys.header)
    }

    // MARK: names

    /// The lookup tag: a keyed BLAKE2b of (parent, name), unique per dictionary, so a name
    /// is found with one indexed query without decrypting its siblings.
    func tag(for name: ItemName, in parent: NodeID) -> [UInt8] {
        var message = [UInt8](repeating: 0, count: 8 + name.count)
        defer { wipe(&message) }
        message.store(UInt64(bitPattern: parent.rawValue), at: 0, width: 8)
        name.withUnsafeBytes { bytes in
            message.withUnsafeMutableBytes { $0.baseAddress!.advanced(by: 8).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
        }
        return VaultKeys.keyedHash(message, key: keys.tag)
    }

    func sealName(_ name: ItemName, _ place: RecordPlace, parent: NodeID) -> [UInt8] {
        var padded = name.withUnsafeBytes { RecordCipher.pad($0, block: RecordCipher.nameBlock) }
        defer { wipe(&padded) }
        let ad = associatedData(.name, place, binding: UInt64(bitPattern: parent.rawValue))
        return padded.withUnsafeBytes { AEAD.seal($0, key: keys.name, associatedData: ad) }
    }

    func openName(_ sealed: [UInt8], _ place: RecordPlace, parent: NodeID) -> ItemName? {
        openPaddedName(sealed, associatedData: associatedData(.name, place, binding: UInt64(bitPattern: parent.rawValue))) {
            try? ItemName(bytes: $0)
        }
    }

    /// Opens a name box padded to `nameBlock`, handing the unpadded bytes to `make`; the
    /// decrypted array is wiped on return.
    private func openPaddedName<Name>(_ sealed: [UInt8], associatedData ad: [UInt8],
                                      _ make: (UnsafeRawBufferPointer) -> Name?) -> Name? {
        guard var plain = AEAD.openMetadata(sealed, key: keys.name, associatedData: ad) else { return nil }
        defer { wipe(&plain) }
        var unpadded = 0
        guard !plain.isEmpty,
              plain.withUnsafeMutableBufferPointer({ sodium_unpad(&unpadded, $0.baseAddress!, $0.count, RecordCipher.nameBlock) }) == 0 else {
            return nil
        }
        return plain.withUnsafeBytes { make(UnsafeRawBufferPointer(rebasing: $0[..<unpadded])) }
    }

    // MARK: attributes

    func sealAttributes(_ attributes: NodeAttributes, _ place: RecordPlace) -> [UInt8] {
        let ad = associatedData(.attributes, place, binding: 0)
        return attributes.encoded().withUnsafeBytes { AEAD.seal($0, key: keys.content, associatedData: ad) }
    }

    /// Opens an attributes record of `layout`: only the current one, except while upgrading.
    func openAttributes(_ sealed: [UInt8], _ place: RecordPlace,
                        layout: NodeAttributes.Layout = .current) -> NodeAttributes? {
        guard AEAD.plaintextCount(ofSealed: sealed) == layout.encodedCount,
              var plain = AEAD.openMetadata(sealed, key: keys.content, associatedData: associatedData(.attributes, place, binding: 0)) else {
            return nil
        }
        defer { wipe(&plain) }
        return plain.withUnsafeBytes { NodeAttributes(decoding: $0, layout: layout) }
    }

    // MARK: contents

    static func contentBucket(for count: Int) -> Int {
        var bucket = smallestContentBucket
        while bucket < count + 1 { bucket <<= 1 }
        return bucket
    }

    /// Pads the content in locked memory, then encrypts it; the padded copy is wiped on return.
    func sealContent(_ content: borrowing SecureBuffer, _ place: RecordPlace, generation: UInt64) throws(VaultError) -> [UInt8] {
        try sealPadded(content, associatedData: associatedData(.content, place, binding: generation))
    }

    /// Pads `content` to its bucket in a locked copy, wiped on return, and seals that.
    private func sealPadded(_ content: borrowing SecureBuffer, associatedData ad: [UInt8]) throws(VaultError) -> [UInt8] {
        let bucket = RecordCipher.contentBucket(for: content.count)
        var padded = try SecureBuffer(capacity: bucket)
        try content.withUnsafeBytes { (bytes) throws(VaultError) in try padded.append(bytes) }
        guard RecordCipher.pad(&padded, block: bucket) else {
            preconditionFailure("content bucket too small for its padding")
        }
        return padded.withUnsafeBytes { AEAD.seal($0, key: keys.content, associatedData: ad) }
    }

    /// The same, padding in the caller's buffer (grown to its bucket if needed) and restoring
    /// its count afterwards: no second locked copy, which costs several system calls to map.
    func sealContent(inPlace content: inout SecureBuffer, _ place: RecordPlace, generation: UInt64) throws(VaultError) -> [UInt8] {
        let count = content.count
        let bucket = RecordCipher.contentBucket(for: count)
        try content.reserve(bucket)
        guard RecordCipher.pad(&content, block: bucket) else {
            preconditionFailure("content bucket too small for its padding")
        }
        defer { content.setCount(count) }  // wipes the padding
        let ad = associatedData(.content, place, binding: generation)
        return content.withUnsafeBytes { AEAD.seal($0, key: keys.content, associatedData: ad) }
    }

    /// Decrypts into locked memory; nil when the box fails authentication or its length
    /// disagrees with the attributes.
    func openContent(_ sealed: [UInt8], _ place: RecordPlace, generation: UInt64, expectedCount: Int) throws(VaultError) -> SecureBuffer? {
        guard let plain = try openPadded(sealed, associatedData: associatedData(.content, place, binding: generation)),
              plain.count == expectedCount else { return nil }
        return plain
    }

    /// Opens a box sealed by `sealPadded` into locked memory, without its padding.
    private func openPadded(_ sealed: [UInt8], associatedData ad: [UInt8]) throws(VaultError) -> SecureBuffer? {
        guard let plainCount = AEAD.plaintextCount(ofSealed: sealed) else { return nil }
        var plain = try SecureBuffer(capacity: plainCount)
        guard AEAD.open(sealed, key: keys.content, associatedData: ad, into: &plain),
              RecordCipher.unpad(&plain, block: plainCount) else { return nil }
        return plain
    }

    // MARK: a node's attributes (extended attributes)

    /// An attribute's tag within its node: keyed BLAKE2b of (node, name), the key its row is
    /// found by. Bound into both of the attribute's boxes, so a name or value moved to another
    /// name of the same node fails to open.
    func attributeTag(for name: AttributeName, of node: NodeID) -> [UInt8] {
        var id: [UInt8] = []
        id.appendLittleEndian(UInt64(bitPattern: node.rawValue))
        return id.withUnsafeBytes { idBytes in
            name.withUnsafeBytes { VaultKeys.keyedHash([idBytes, $0], key: keys.attributeTag) }
        }
    }

    /// The search tag of a (name, value) pair: keyed BLAKE2b of the name's length, the name and
    /// the value, deliberately not bound to a node, so every node holding the same pair has the
    /// same tag and a search is one indexed query. (Someone with the file therefore sees which
    /// nodes share a pair, never the pair.)
    func attributeSearchTag(name: AttributeName, value: borrowing SecureBuffer) -> [UInt8] {
        var length: [UInt8] = []
        length.appendLittleEndian(UInt64(name.count))
        return length.withUnsafeBytes { lengthBytes in
            name.withUnsafeBytes { nameBytes in
                value.withUnsafeBytes { VaultKeys.keyedHash([lengthBytes, nameBytes, $0], key: keys.attributeSearch) }
            }
        }
    }

    private func attributeAssociatedData(_ purpose: Purpose, _ place: RecordPlace, tag: [UInt8]) -> [UInt8] {
        associatedData(purpose, place, binding: 0) + tag
    }

    /// Padded to `nameBlock` like node names.
    func sealAttributeName(_ name: AttributeName, _ place: RecordPlace, tag: [UInt8]) -> [UInt8] {
        var padded = name.withUnsafeBytes { RecordCipher.pad($0, block: RecordCipher.nameBlock) }
        defer { wipe(&padded) }
        let ad = attributeAssociatedData(.attributeName, place, tag: tag)
        return padded.withUnsafeBytes { AEAD.seal($0, key: keys.name, associatedData: ad) }
    }

    func openAttributeName(_ sealed: [UInt8], _ place: RecordPlace, tag: [UInt8]) -> AttributeName? {
        openPaddedName(sealed, associatedData: attributeAssociatedData(.attributeName, place, tag: tag)) {
            try? AttributeName(bytes: $0)
        }
    }

    /// Padded to a power of two like contents.
    func sealAttributeValue(_ value: borrowing SecureBuffer, _ place: RecordPlace, tag: [UInt8]) throws(VaultError) -> [UInt8] {
        try sealPadded(value, associatedData: attributeAssociatedData(.attributeValue, place, tag: tag))
    }

    func openAttributeValue(_ sealed: [UInt8], _ place: RecordPlace, tag: [UInt8]) throws(VaultError) -> SecureBuffer? {
        try openPadded(sealed, associatedData: attributeAssociatedData(.attributeValue, place, tag: tag))
    }

    // MARK: padding (libsodium's ISO/IEC 7816-4 padding)

    /// The caller wipes the result (a padded name).
    private static func pad(_ bytes: UnsafeRawBufferPointer, block: Int) -> [UInt8] {
        let count = bytes.count
        var out = [UInt8](repeating: 0, count: count + block - count % block)
        out.withUnsafeMutableBytes { $0.copyMemory(from: bytes) }
        var padded = 0
        let rc = out.withUnsafeMutableBufferPointer { sodium_pad(&padded, $0.baseAddress!, count, block, $0.count) }
        precondition(rc == 0 && padded == out.count, "sodium_pad failed")
        return out
    }

    private static func pad(_ buffer: inout SecureBuffer, block: Int) -> Bool {
        var ok = false
        let unpadded = buffer.count
        buffer.withUnsafeMutableStorage { storage in
            var padded = 0
            ok = sodium_pad(&padded, storage.baseAddress!.assumingMemoryBound(to: UInt8.self), unpadded, block, storage.count) == 0
            return ok ? padded : unpadded
        }
        return ok
    }

    private static func unpad(_ buffer: inout SecureBuffer, block: Int) -> Bool {
        var ok = false
        let padded = buffer.count
        buffer.withUnsafeMutableStorage { storage in
            var unpadded = 0
            ok = padded > 0 && sodium_unpad(&unpadded, storage.baseAddress!.assumingMemoryBound(to: UInt8.self), padded, block) == 0
            return ok ? unpadded : 0
        }
        return ok
    }
}
