import CSodium
import Locking
import Synchronization

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
final class RecordCipher: GenerationSealer {
    enum Purpose: UInt8 {
        case keySlot = 1, name = 2, attributes = 3, content = 4, attributeName = 5, attributeValue = 6
        case rules = 7
        /// Sealed boxes take no associated data: this one goes into the batch's plaintext.
        case accessLog = 8
        /// Contents of the other accessibility classes. Each class has its own key already; a
        /// purpose of its own as well binds the class into the associated data, so a content is
        /// never accepted under another class even if keys were ever shared, and the binding is
        /// explicit in the one place that says what every record is bound to. When-unlocked
        /// contents keep purpose 4, so contents sealed before classes existed stay valid.
        case afterFirstUnlockContent = 9, thisDeviceOnlyContent = 10
        /// Format 9: the blocks of a large item's content and the map of their generations,
        /// one purpose per class for the reason above (`RecordCipher+ContentBlocks`).
        case whenUnlockedBlock = 11, afterFirstUnlockBlock = 12, thisDeviceOnlyBlock = 13
        case whenUnlockedBlockMap = 14, afterFirstUnlockBlockMap = 15, thisDeviceOnlyBlockMap = 16
        /// A TPM PIN slot's wrapped master key (format 10, `PINSlot`).
        case pinSlot = 17
        /// Format 11: an access log batch that names the digest of the one before it and,
        /// when a member wrote it, carries their signature (`AccessLogBatch`).
        case chainedAccessLog = 18
    }

    /// What an access log batch's plaintext names itself as (see `AccessLogBatch`).
    static let accessLogPurpose = Purpose.accessLog.rawValue
    static let chainedAccessLogPurpose = Purpose.chainedAccessLog.rawValue

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
    /// nil in a cipher that a lock reduced.
    private let master: Subkey?
    /// The this-device-only content key, derived on first use (reading the host key, or making
    /// one); a vault without such items never touches the host key file.
    private let thisDeviceOnlyKey = OrderedMutex<Subkey?>(.thisDeviceOnlyKey, nil)

    init(vaultID: [UInt8], master: borrowing SecureBuffer) throws(VaultError) {
        self.vaultID = vaultID
        keys = try VaultKeys(master: master)
        self.master = Subkey(try master.withUnsafeBytes { (bytes) throws(VaultError) in try SecureBuffer(copying: bytes) })
    }

    private init(vaultID: [UInt8], keys: VaultKeys) {
        self.vaultID = vaultID
        self.keys = keys
        master = nil
    }

    /// A cipher for a locked vault that still serves after-first-unlock items: it shares only
    /// the keys they need (see `VaultKeys.afterFirstUnlockOnly`); the rest are wiped when this
    /// cipher is released.
    var afterFirstUnlockOnly: RecordCipher {
        RecordCipher(vaultID: vaultID, keys: keys.afterFirstUnlockOnly)
    }

    /// False for a cipher a lock reduced.
    var holdsEveryKey: Bool { master != nil }

    func withMasterKey<R: ~Copyable>(_ body: (borrowing SecureBuffer) throws(VaultError) -> R) throws(VaultError) -> R {
        guard let master else { throw .locked }
        return try body(master.bytes)
    }

    /// A key this cipher may not hold: what needs it fails as locked.
    private func required(_ key: Subkey?) throws(VaultError) -> Subkey {
        guard let key else { throw .locked }
        return key
    }

    /// A key every cipher holds, or one only reached by operations that a locked vault refuses
    /// before they start (`Vault.withStore`): missing, it is a bug, and stopping is failing closed.
    private func present(_ key: Subkey?) -> Subkey {
        guard let key else { preconditionFailure("a key wiped by the lock was needed") }
        return key
    }

    private static func associatedData(_ purpose: Purpose, vaultID: [UInt8], subject: Int64, binding: UInt64) -> [UInt8] {
        var ad = formatTag
        ad.append(purpose.rawValue)
        ad += vaultID
        ad.appendLittleEndian(UInt64(bitPattern: subject))
        ad.appendLittleEndian(binding)
        return ad
    }

    func associatedData(_ purpose: Purpose, _ place: RecordPlace, binding: UInt64) -> [UInt8] {
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

    /// A PIN slot's: as a passphrase slot's (no vault id, for the same reason), and the PCRs and
    /// a BLAKE2b-256 of the TPM's sealed object, so a slot given other PCRs or another sealed key fails.
    static func pinSlotAssociatedData(slotID: Int64, parameters: KDFParameters, pcrMask: UInt32, sealedKey: [UInt8]) -> [UInt8] {
        var ad = associatedData(.pinSlot, vaultID: [], subject: slotID, binding: UInt64(bitPattern: parameters.algorithm))
        ad.appendLittleEndian(parameters.opsLimit)
        ad.appendLittleEndian(parameters.memLimit)
        ad.appendLittleEndian(UInt64(pcrMask))
        var digest = [UInt8](repeating: 0, count: 32)
        crypto_generichash(&digest, 32, sealedKey, UInt64(sealedKey.count), nil, 0)
        return ad + digest
    }

    // MARK: header

    func headerMACMatches(_ stored: [UInt8], itemSizeLimit: Int, oldestFormat: Int?) -> Bool {
        let expected = headerMAC(itemSizeLimit: itemSizeLimit, oldestFormat: oldestFormat)
        return stored.count == expected.count && sodium_memcmp(stored, expected, expected.count) == 0
    }

    /// The header's MAC. From format 4 on (`VaultFormat.oldestSealedVersion`) it also binds the
    /// oldest format version the vault may be read as, its own: SQLite's user_version is not
    /// sealed, and a vault set back to version 3 with its newer tables dropped would otherwise be
    /// upgraded again, its access rules and log gone, and one set back to 4 would be read by
    /// format 4 code, which takes item properties for damage. Older vaults' MACs bind none (nil).
    func headerMAC(itemSizeLimit: Int, oldestFormat: Int?) -> [UInt8] {
        var message = RecordCipher.formatTag + Array("header".utf8) + vaultID
        message.appendLittleEndian(UInt64(VaultFormat.applicationID))
        message.appendLittleEndian(UInt64(itemSizeLimit))
        if let oldestFormat { message.appendLittleEndian(UInt64(oldestFormat)) }
        return VaultKeys.keyedHash(message, key: present(keys.header))
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
        return VaultKeys.keyedHash(message, key: present(keys.tag))
    }

    func sealName(_ name: ItemName, _ place: RecordPlace, parent: NodeID) -> [UInt8] {
        var padded = name.withUnsafeBytes { RecordCipher.pad($0, block: RecordCipher.nameBlock) }
        defer { wipe(&padded) }
        let ad = associatedData(.name, place, binding: UInt64(bitPattern: parent.rawValue))
        return padded.withUnsafeBytes { AEAD.seal($0, key: present(keys.name).bytes, associatedData: ad) }
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
        guard var plain = AEAD.openMetadata(sealed, key: present(keys.name).bytes, associatedData: ad) else { return nil }
        defer { wipe(&plain) }
        var unpadded = 0
        guard !plain.isEmpty,
              plain.withUnsafeMutableBufferPointer({ sodium_unpad(&unpadded, $0.baseAddress!, $0.count, RecordCipher.nameBlock) }) == 0 else {
            return nil
        }
        return plain.withUnsafeBytes { make(UnsafeRawBufferPointer(rebasing: $0[..<unpadded])) }
    }

    // MARK: attributes

    /// Always in the current layout, under the node-attributes key.
    func sealAttributes(_ attributes: NodeAttributes, _ place: RecordPlace) -> [UInt8] {
        let ad = associatedData(.attributes, place, binding: 0)
        return attributes.encoded().withUnsafeBytes { AEAD.seal($0, key: present(keys.nodeAttributes).bytes, associatedData: ad) }
    }

    /// Opens an attributes record: of `layout` (while upgrading), else of a layout read in
    /// normal use, told apart by its length, which authentication covers. Layout 3 is under
    /// the node-attributes key, older ones under the content key, which a locked vault lacks
    /// (`.locked`). nil when the record fails authentication.
    func openAttributes(_ sealed: [UInt8], _ place: RecordPlace,
                        layout: NodeAttributes.Layout? = nil) throws(VaultError) -> NodeAttributes? {
        let count = AEAD.plaintextCount(ofSealed: sealed)
        let candidates = layout.map { [$0] } ?? NodeAttributes.Layout.readable
        guard let found = candidates.first(where: { $0.encodedCount == count }) else { return nil }
        let key = found == .v3 ? present(keys.nodeAttributes) : try required(keys.content)
        guard var plain = AEAD.openMetadata(sealed, key: key.bytes, associatedData: associatedData(.attributes, place, binding: 0)) else {
            return nil
        }
        defer { wipe(&plain) }
        return plain.withUnsafeBytes { NodeAttributes(decoding: $0, layout: found) }
    }

    /// Whether an attributes record is in the current layout (readable while locked), judged
    /// by its length alone.
    static func isCurrentLayout(_ sealed: [UInt8]) -> Bool {
        AEAD.plaintextCount(ofSealed: sealed) == NodeAttributes.Layout.current.encodedCount
    }

    // MARK: contents

    static func contentBucket(for count: Int) -> Int {
        var bucket = smallestContentBucket
        while bucket < count + 1 { bucket <<= 1 }
        return bucket
    }

    /// The key and purpose of a class's contents.
    func content(_ accessibility: AccessibilityClass) throws(VaultError) -> (Subkey, Purpose) {
        switch accessibility {
        case .whenUnlocked: return (try required(keys.content), .content)
        case .afterFirstUnlock: return (try required(keys.afterFirstUnlockContent), .afterFirstUnlockContent)
        case .thisDeviceOnly: return (try deviceKey(), .thisDeviceOnlyContent)
        }
    }

    private func deviceKey() throws(VaultError) -> Subkey {
        let base = try required(keys.thisDeviceOnlyContent)
        return try thisDeviceOnlyKey.withLock { (cached) throws(VaultError) -> Subkey in
            if let cached { return cached }
            let hostKey = try HostKey.load()
            let derived = try VaultKeys.thisDeviceOnlyKey(base: base, hostKey: hostKey)
            cached = derived
            return derived
        }
    }

    /// Pads the content in locked memory, then encrypts it; the padded copy is wiped on return.
    func sealContent(_ content: borrowing SecureBuffer, _ place: RecordPlace, generation: UInt64,
                     accessibility: AccessibilityClass) throws(VaultError) -> [UInt8] {
        let (key, purpose) = try self.content(accessibility)
        return try sealPadded(content, key: key, associatedData: associatedData(purpose, place, binding: generation))
    }

    /// Pads `content` to its bucket in a locked copy, wiped on return, and seals that.
    private func sealPadded(_ content: borrowing SecureBuffer, key: Subkey, associatedData ad: [UInt8]) throws(VaultError) -> [UInt8] {
        let bucket = RecordCipher.contentBucket(for: content.count)
        var padded = try SecureBuffer(capacity: bucket)
        try content.withUnsafeBytes { (bytes) throws(VaultError) in try padded.append(bytes) }
        guard RecordCipher.pad(&padded, block: bucket) else {
            preconditionFailure("content bucket too small for its padding")
        }
        return padded.withUnsafeBytes { AEAD.seal($0, key: key.bytes, associatedData: ad) }
    }

    /// The same, padding in the caller's buffer (grown to its bucket if needed) and restoring
    /// its count afterwards: no second locked copy, which costs several system calls to map.
    func sealContent(inPlace content: inout SecureBuffer, _ place: RecordPlace, generation: UInt64,
                     accessibility: AccessibilityClass) throws(VaultError) -> [UInt8] {
        let (key, purpose) = try self.content(accessibility)
        let count = content.count
        let bucket = RecordCipher.contentBucket(for: count)
        try content.reserve(bucket)
        guard RecordCipher.pad(&content, block: bucket) else {
            preconditionFailure("content bucket too small for its padding")
        }
        defer { content.setCount(count) }  // wipes the padding
        let ad = associatedData(purpose, place, binding: generation)
        return content.withUnsafeBytes { AEAD.seal($0, key: key.bytes, associatedData: ad) }
    }

    /// Decrypts into locked memory; nil when the box fails authentication or its length
    /// disagrees with the attributes.
    func openContent(_ sealed: [UInt8], _ place: RecordPlace, generation: UInt64, expectedCount: Int,
                     accessibility: AccessibilityClass) throws(VaultError) -> SecureBuffer? {
        let (key, purpose) = try content(accessibility)
        guard let plain = try openPadded(sealed, key: key, associatedData: associatedData(purpose, place, binding: generation),
                                         expectedCount: expectedCount),
              plain.count == expectedCount else { return nil }
        return plain
    }

    /// Opens a box sealed by `sealPadded` into locked memory, without its padding. With
    /// `expectedCount`, the padding is looked for from there on only (see `unpad`).
    private func openPadded(_ sealed: [UInt8], key: Subkey, associatedData ad: [UInt8],
                            expectedCount: Int? = nil) throws(VaultError) -> SecureBuffer? {
        guard let plainCount = AEAD.plaintextCount(ofSealed: sealed) else { return nil }
        if let expectedCount, expectedCount >= plainCount { return nil }
        var plain = try SecureBuffer(capacity: plainCount)
        guard AEAD.open(sealed, key: key.bytes, associatedData: ad, into: &plain),
              RecordCipher.unpad(&plain, from: expectedCount ?? 0) else { return nil }
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
            name.withUnsafeBytes { VaultKeys.keyedHash([idBytes, $0], key: present(keys.attributeTag)) }
        }
    }

    /// The search tag of a (name, value) pair (see `AttributeSearchKey`).
    func attributeSearchTag(name: AttributeName, value: borrowing SecureBuffer) -> [UInt8] {
        AttributeSearchKey(present(keys.attributeSearch)).tag(name: name, value: value)
    }

    /// The search tags' key, for a lock to keep on its own; nil in a cipher a lock reduced.
    var attributeSearchKey: AttributeSearchKey? { keys.attributeSearch.map(AttributeSearchKey.init) }

    private func attributeAssociatedData(_ purpose: Purpose, _ place: RecordPlace, tag: [UInt8]) -> [UInt8] {
        associatedData(purpose, place, binding: 0) + tag
    }

    /// Padded to `nameBlock` like node names.
    func sealAttributeName(_ name: AttributeName, _ place: RecordPlace, tag: [UInt8]) -> [UInt8] {
        var padded = name.withUnsafeBytes { RecordCipher.pad($0, block: RecordCipher.nameBlock) }
        defer { wipe(&padded) }
        let ad = attributeAssociatedData(.attributeName, place, tag: tag)
        return padded.withUnsafeBytes { AEAD.seal($0, key: present(keys.name).bytes, associatedData: ad) }
    }

    func openAttributeName(_ sealed: [UInt8], _ place: RecordPlace, tag: [UInt8]) -> AttributeName? {
        openPaddedName(sealed, associatedData: attributeAssociatedData(.attributeName, place, tag: tag)) {
            try? AttributeName(stored: $0)
        }
    }

    /// Padded to a power of two like contents.
    func sealAttributeValue(_ value: borrowing SecureBuffer, _ place: RecordPlace, tag: [UInt8]) throws(VaultError) -> [UInt8] {
        try sealPadded(value, key: required(keys.content), associatedData: attributeAssociatedData(.attributeValue, place, tag: tag))
    }

    func openAttributeValue(_ sealed: [UInt8], _ place: RecordPlace, tag: [UInt8]) throws(VaultError) -> SecureBuffer? {
        try openPadded(sealed, key: required(keys.content), associatedData: attributeAssociatedData(.attributeValue, place, tag: tag))
    }

    // MARK: access rules

    /// A node's rules, bound to the node and its incarnation like its attributes: a record
    /// copied to another node, or left over from a deleted one, fails to open.
    func sealRules(_ rules: [AccessRule], _ place: RecordPlace) throws(VaultError) -> [UInt8] {
        let ad = associatedData(.rules, place, binding: 0)
        let key = try required(keys.content)
        return RuleRecord.encode(rules).withUnsafeBytes { AEAD.seal($0, key: key.bytes, associatedData: ad) }
    }

    /// nil when the record fails authentication or is not a well-formed record.
    func openRules(_ sealed: [UInt8], _ place: RecordPlace) throws(VaultError) -> [AccessRule]? {
        let key = try required(keys.content)
        guard let plain = AEAD.openMetadata(sealed, key: key.bytes, associatedData: associatedData(.rules, place, binding: 0)) else {
            return nil
        }
        return RuleRecord.decode(plain)
    }

    /// The MAC over every rule record of the vault, kept in the vault's row: one record more,
    /// one less, or one put back from an earlier state changes it, which a per-record seal
    /// alone cannot show. `rows` are (node, incarnation, sealed record); the order given does
    /// not matter (they are taken by node id), and every field is length-prefixed.
    func rulesMAC(_ rows: [(place: RecordPlace, sealed: [UInt8])]) throws(VaultError) -> [UInt8] {
        var message = RecordCipher.formatTag + Array("rules".utf8) + vaultID
        message.appendLittleEndian(UInt64(rows.count))
        for row in rows.sorted(by: { $0.place.node.rawValue < $1.place.node.rawValue }) {
            message.appendLittleEndian(UInt64(bitPattern: row.place.node.rawValue))
            message.appendLittleEndian(UInt64(row.place.incarnation.count))
            message += row.place.incarnation
            message.appendLittleEndian(UInt64(row.sealed.count))
            message += row.sealed
        }
        return VaultKeys.keyedHash(message, key: try required(keys.rules))
    }

    func rulesMACMatches(_ stored: [UInt8], _ rows: [(place: RecordPlace, sealed: [UInt8])]) throws(VaultError) -> Bool {
        let expected = try rulesMAC(rows)
        return stored.count == expected.count && sodium_memcmp(stored, expected, expected.count) == 0
    }

    // MARK: generation (format 8 on)

    /// The MAC binding the vault's state at a generation (see `VaultState`). Under the header's
    /// key, which every cipher holds (a locked mount's reduced one too, so its writes raise the
    /// generation as well), kept apart from the header's own MAC by its label.
    package func stateMAC(_ state: VaultState) -> [UInt8] {
        var message = RecordCipher.formatTag + Array("generation".utf8) + vaultID
        message.appendLittleEndian(UInt64(bitPattern: state.generation))
        for part in [state.headerMAC, state.rulesMAC ?? [], state.membersMAC ?? []] {
            message.appendLittleEndian(UInt64(part.count))
            message += part
        }
        return VaultKeys.keyedHash(message, key: present(keys.header))
    }

    func stateMACMatches(_ state: VaultState) -> Bool {
        guard let stored = state.stateMAC else { return false }
        let expected = stateMAC(state)
        return stored.count == expected.count && sodium_memcmp(stored, expected, expected.count) == 0
    }

    /// The MAC over every member slot row (name, public key, sealed box and its own MAC), as
    /// `rulesMAC` is over the rule records: a slot deleted (a member removed) and put back, or
    /// one added, changes it. Each slot's own MAC alone cannot show a slot put back.
    func membersMAC(_ rows: [MemberSlotRow]) -> [UInt8] {
        var message = RecordCipher.formatTag + Array("members".utf8) + vaultID
        message.appendLittleEndian(UInt64(rows.count))
        for row in rows.sorted(by: { $0.name.lexicographicallyPrecedes($1.name) }) {
            for part in [row.name, row.publicKey, row.sealedMasterKey] {
                message.appendLittleEndian(UInt64(part.count))
                message += part
            }
        }
        return VaultKeys.keyedHash(message, key: present(keys.header))
    }

    func membersMACMatches(_ stored: [UInt8]?, _ rows: [MemberSlotRow]) -> Bool {
        guard let stored else { return false }
        let expected = membersMAC(rows)
        return stored.count == expected.count && sodium_memcmp(stored, expected, expected.count) == 0
    }

    /// The MAC of this machine's record of the newest generation seen at `location`
    /// (`SeenGenerations`), made while `headerMAC` was the vault's (it changes with the key).
    /// A row that names a TPM counter binds its handle and count too (rows without one keep
    /// the MAC they were written with).
    func seenMAC(location: String, generation: Int64, headerMAC: [UInt8], counter: (handle: UInt32, value: UInt64)? = nil) -> [UInt8] {
        var message = RecordCipher.formatTag + Array("seen".utf8) + vaultID
        message.appendLittleEndian(UInt64(bitPattern: generation))
        for part in [Array(location.utf8), headerMAC] {
            message.appendLittleEndian(UInt64(part.count))
            message += part
        }
        if let counter {
            message += Array("tpm counter".utf8)
            message.appendLittleEndian(UInt64(counter.handle))
            message.appendLittleEndian(counter.value)
        }
        return VaultKeys.keyedHash(message, key: present(keys.header))
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

    /// Pads the buffer to `block` bytes. sodium_pad works in constant time over its whole block,
    /// which for a bucket of 1 or 2 MiB cost milliseconds a store (a third of the daemon's time
    /// under mixed work); the padding after the content is the same padding as a block of its
    /// own (0x80, then zeros to its end), so only that part is handed over. Its time then tells
    /// the content's length, which any process that may time the mount may stat anyway.
    private static func pad(_ buffer: inout SecureBuffer, block: Int) -> Bool {
        var ok = false
        let unpadded = buffer.count
        guard block > unpadded else { return false }
        buffer.withUnsafeMutableStorage { storage in
            var padding = 0
            let tail = storage.baseAddress!.assumingMemoryBound(to: UInt8.self) + unpadded
            ok = sodium_pad(&padding, tail, 0, block - unpadded, storage.count - unpadded) == 0
            return ok ? unpadded + padding : unpadded
        }
        return ok
    }

    /// Removes the padding, looking for it from `start` on (the whole buffer is one block from
    /// there; a content the attributes give the length of starts its padding there, see `pad`).
    private static func unpad(_ buffer: inout SecureBuffer, from start: Int = 0) -> Bool {
        var ok = false
        let padded = buffer.count
        guard start >= 0, start < padded else { return false }
        buffer.withUnsafeMutableStorage { storage in
            var unpadded = 0
            let tail = storage.baseAddress!.assumingMemoryBound(to: UInt8.self) + start
            ok = sodium_unpad(&unpadded, tail, padded - start, padded - start) == 0
            return ok ? start + unpadded : 0
        }
        return ok
    }
}
