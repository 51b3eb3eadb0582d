/// An item's content as records (format 9): an item of up to `VaultFormat.contentBlockBytes`
/// keeps it whole in its node's content record, a larger one in blocks of that size with the
/// map of their generations in the content record (`BlockMap`). Format 8 records of larger
/// items are whole too, and still read; they take blocks at their next write.
extension NodeStore {
    static let blockBytes = VaultFormat.contentBlockBytes

    /// Whether a content of `size` bytes is stored in blocks.
    static func isBlocked(_ size: Int) -> Bool { size > blockBytes }

    /// The error for a content record or block that fails to open: another host key and a
    /// damaged record look the same to the cipher, so the class says which is likely.
    func unreadableContent(_ record: NodeRecord) -> VaultError {
        record.attributes.accessibility == .thisDeviceOnly ? .otherDevice(describe(record.id)) : .integrityFailure(describe(record.id))
    }

    /// The map of a blocked item's content; nil when the item is stored whole (small, or a
    /// format 8 record of a large one).
    func blockMap(of record: NodeRecord, sealed: [UInt8]?) throws(VaultError) -> BlockMap? {
        guard NodeStore.isBlocked(record.attributes.size) else { return nil }
        guard let sealed else { throw .integrityFailure(describe(record.id)) }
        do {
            return try cipher.openBlockMap(sealed, record.place, contentGeneration: record.attributes.contentGeneration,
                                           size: record.attributes.size, accessibility: record.attributes.accessibility)
        } catch .otherDevice {
            throw unreadableContent(record)
        }
    }

    /// Opens stored blocks into `receive`, each with the generation `map` gives its index. A
    /// block the map has but the rows lack (deleted), or one that fails, is an integrity
    /// failure; rows at holes are no part of the content and are left alone.
    func openBlocks(_ rows: [ContentBlockRow], wanted: some Sequence<Int>, of record: NodeRecord, map: BlockMap,
                    _ receive: (Int, consuming SecureBuffer) -> Void) throws(VaultError) {
        var byIndex: [Int: [UInt8]] = [:]
        for row in rows { byIndex[row.index] = row.sealed }
        for index in wanted {
            let generation = map.generation(of: index)
            guard generation != 0 else { continue }
            guard let sealed = byIndex[index] else {
                throw .integrityFailure(describe(record.id) + " (content block \(index) missing)")
            }
            var block = try SecureBuffer(capacity: NodeStore.blockBytes)
            let opened: Bool
            do {
                opened = try cipher.openBlock(sealed, index: index, record.place, generation: generation,
                                              accessibility: record.attributes.accessibility, into: &block)
            } catch .otherDevice {
                throw unreadableContent(record)
            }
            guard opened else { throw unreadableContent(record) }
            receive(index, block)
        }
    }

    /// An item's whole content, from its content record and (when blocked) its blocks. Inside
    /// one snapshot with the record's row (a read or write transaction), so the blocks are of
    /// the same version.
    func wholeContent(of record: NodeRecord, sealed: [UInt8]?) throws(VaultError) -> SecureBuffer {
        guard let map = try blockMap(of: record, sealed: sealed) else { return try content(of: record, sealed: sealed) }
        let size = record.attributes.size
        var content = try SecureBuffer(capacity: size)
        try content.resize(to: size)
        let rows = try storage.contentBlocks(of: record.id, in: 0..<map.generations.count)
        var failure: VaultError?
        try openBlocks(rows, wanted: 0..<map.generations.count, of: record, map: map) { index, block in
            // A block stored when it was the last may be shorter than its place now (the rest
            // reads as zeros) or padded past the end.
            let length = min(NodeStore.blockBytes, size - index * NodeStore.blockBytes)
            block.withUnsafeBytes { bytes in
                do throws(VaultError) {
                    try content.write(UnsafeRawBufferPointer(rebasing: bytes[..<min(length, bytes.count)]), at: index * NodeStore.blockBytes)
                } catch {
                    failure = error
                }
            }
        }
        if let failure { throw failure }
        return content
    }

    /// Stores `content` as the item's content at `generation` under `accessibility`: whole when
    /// small (deleting blocks a larger version left), else every block sealed at `generation`
    /// and a map saying so (deleting blocks past the new end). Gives the content record.
    func storeContent(_ content: borrowing SecureBuffer, _ place: RecordPlace, generation: UInt64,
                      accessibility: AccessibilityClass, previousSize: Int?) throws(VaultError) -> [UInt8] {
        let count = content.count
        if let previousSize, NodeStore.isBlocked(previousSize) {
            try storage.deleteContentBlocks(of: place.node, from: NodeStore.isBlocked(count) ? BlockMap.blockCount(count) : 0)
        }
        guard NodeStore.isBlocked(count) else {
            return try cipher.sealContent(content, place, generation: generation, accessibility: accessibility)
        }
        let blocks = BlockMap.blockCount(count)
        for index in 0..<blocks {
            let start = index * NodeStore.blockBytes
            var block = try SecureBuffer(capacity: NodeStore.blockBytes)
            try content.withUnsafeBytes { (bytes) throws(VaultError) in
                try block.append(UnsafeRawBufferPointer(rebasing: bytes[start..<min(start + NodeStore.blockBytes, count)]))
            }
            try storage.upsertContentBlock(ContentBlockRow(index: index, sealed: cipher.sealBlock(
                block, index: index, place, generation: generation, accessibility: accessibility)), of: place.node)
        }
        return try cipher.sealBlockMap(BlockMap(size: count, generation: generation), place, contentGeneration: generation,
                                       accessibility: accessibility)
    }

    /// The same, sealing a small content in place in the caller's buffer (no second locked copy).
    func storeContent(inPlace content: inout SecureBuffer, _ place: RecordPlace, generation: UInt64,
                      accessibility: AccessibilityClass, previousSize: Int?) throws(VaultError) -> [UInt8] {
        guard !NodeStore.isBlocked(content.count) else {
            return try storeContent(content, place, generation: generation, accessibility: accessibility, previousSize: previousSize)
        }
        if let previousSize, NodeStore.isBlocked(previousSize) { try storage.deleteContentBlocks(of: place.node, from: 0) }
        return try cipher.sealContent(inPlace: &content, place, generation: generation, accessibility: accessibility)
    }
}
