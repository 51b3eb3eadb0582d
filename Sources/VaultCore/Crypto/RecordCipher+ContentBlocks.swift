/// Format 9's content blocks and the map of their generations (`VaultFormat.contentBlockBytes`).
///
/// A block is sealed under its item's class key with associated data naming the vault, the node
/// and its incarnation, the block's generation (the content generation that last wrote it) and
/// its index: a block moved to another index or item, or an older one put back, fails to open.
/// The map holds each block's generation (0 for a hole: never stored, reads as zeros) and is
/// bound to the item's content generation, which the sealed attributes carry, so the map of an
/// older version fails too. Each class has block and map purposes of its own, as contents do.
extension RecordCipher {
    private static func blockPurposes(_ accessibility: AccessibilityClass) -> (block: Purpose, map: Purpose) {
        switch accessibility {
        case .whenUnlocked: return (.whenUnlockedBlock, .whenUnlockedBlockMap)
        case .afterFirstUnlock: return (.afterFirstUnlockBlock, .afterFirstUnlockBlockMap)
        case .thisDeviceOnly: return (.thisDeviceOnlyBlock, .thisDeviceOnlyBlockMap)
        }
    }

    /// The plaintext length a block of `count` bytes is stored with: a full block as it is, a
    /// shorter one (the last) padded with zeros to the next power of two from 64 on, so its
    /// ciphertext tells the item's size only to within that bucket.
    static func storedBlockLength(_ count: Int) -> Int {
        let full = VaultFormat.contentBlockBytes
        guard count < full else { return full }
        var bucket = smallestContentBucket
        while bucket < count { bucket <<= 1 }
        return min(bucket, full)
    }

    private func blockAssociatedData(_ purpose: Purpose, _ place: RecordPlace, generation: UInt64, index: Int) -> [UInt8] {
        var ad = associatedData(purpose, place, binding: generation)
        ad.appendLittleEndian(UInt64(index))
        return ad
    }

    /// Seals block `index` of a content; `block`'s bytes past its count must be zero (as a
    /// SecureBuffer keeps them) and its capacity must hold the padded length.
    func sealBlock(_ block: borrowing SecureBuffer, index: Int, _ place: RecordPlace, generation: UInt64,
                   accessibility: AccessibilityClass) throws(VaultError) -> [UInt8] {
        let (key, _) = try content(accessibility)
        let ad = blockAssociatedData(RecordCipher.blockPurposes(accessibility).block, place, generation: generation, index: index)
        return block.withPaddedBytes(RecordCipher.storedBlockLength(block.count)) { AEAD.seal($0, key: key.bytes, associatedData: ad) }
    }

    /// Opens block `index` into `block` (capacity `VaultFormat.contentBlockBytes`); false when it
    /// fails authentication or is longer than a block.
    func openBlock(_ sealed: [UInt8], index: Int, _ place: RecordPlace, generation: UInt64,
                   accessibility: AccessibilityClass, into block: inout SecureBuffer) throws(VaultError) -> Bool {
        guard let count = AEAD.plaintextCount(ofSealed: sealed), count <= VaultFormat.contentBlockBytes else { return false }
        let (key, _) = try content(accessibility)
        let ad = blockAssociatedData(RecordCipher.blockPurposes(accessibility).block, place, generation: generation, index: index)
        return AEAD.open(sealed, key: key.bytes, associatedData: ad, into: &block)
    }

    func sealBlockMap(_ map: BlockMap, _ place: RecordPlace, contentGeneration: UInt64,
                      accessibility: AccessibilityClass) throws(VaultError) -> [UInt8] {
        let (key, _) = try content(accessibility)
        let ad = associatedData(RecordCipher.blockPurposes(accessibility).map, place, binding: contentGeneration)
        return map.encoded().withUnsafeBytes { AEAD.seal($0, key: key.bytes, associatedData: ad) }
    }

    /// nil when the record is not the map of this version of an item of `size` bytes.
    func openBlockMap(_ sealed: [UInt8], _ place: RecordPlace, contentGeneration: UInt64, size: Int,
                      accessibility: AccessibilityClass) throws(VaultError) -> BlockMap? {
        let (key, _) = try content(accessibility)
        let ad = associatedData(RecordCipher.blockPurposes(accessibility).map, place, binding: contentGeneration)
        guard let plain = AEAD.openMetadata(sealed, key: key.bytes, associatedData: ad) else { return nil }
        return BlockMap(decoding: plain, size: size)
    }
}
