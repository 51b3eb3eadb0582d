/// An open item's content as a mount holds it: the blocks (`VaultFormat.contentBlockBytes`
/// each) it has read or written, each in its own locked slot, and where the rest is stored. A
/// read loads only the blocks it needs, a write loads at most the two it changes in part, and
/// a store writes the blocks that changed (`Vault.storeContent`), so a large item costs what
/// is touched, not its size. Not thread-safe: the driver serialises every use under its mutex.
///
/// The blocks not held here come from the stored version `version` (the item's content
/// generation), read by `map`; a map of nil means every block is held here (the item is stored
/// whole, or was read whole), and a block missing then is a hole. Blocks past `shortest`, the
/// smallest size since that version, were cut here: they read as zeros, whatever is stored.
public final class ItemContent: @unchecked Sendable {
    static let blockBytes = VaultFormat.contentBlockBytes

    let id: NodeID
    /// The size readers see, writes and truncations included.
    public private(set) var count: Int
    private var blocks: [Int: LockedBlock] = [:]
    /// Blocks changed here since the last store.
    private var dirty: Set<Int> = []
    private(set) var version: UInt64
    private var storedSize: Int
    private(set) var map: BlockMap?
    private var shortest: Int
    /// Set when a load found the item stored anew elsewhere and this content, holding no
    /// writes of its own, took that version: the driver takes its attributes too.
    public private(set) var adoptedNode: Node?

    private init(id: NodeID, count: Int, version: UInt64, map: BlockMap?) {
        self.id = id
        self.count = count
        self.version = version
        storedSize = count
        self.map = map
        shortest = count
    }

    /// An item just created, with nothing stored yet.
    public static func empty(of node: Node) -> ItemContent {
        ItemContent(id: node.id, count: 0, version: node.attributes.contentVersion, map: nil)
    }

    /// A content read whole, every block held.
    convenience init(id: NodeID, whole: borrowing SecureBuffer, version: UInt64) throws(VaultError) {
        self.init(id: id, count: whole.count, version: version, map: nil)
        blocks = try ItemContent.split(whole)
    }

    /// A blocked content of which no block is held yet.
    convenience init(id: NodeID, size: Int, version: UInt64, map: BlockMap) {
        self.init(id: id, count: size, version: version, map: map)
    }

    private static func split(_ whole: borrowing SecureBuffer) throws(VaultError) -> [Int: LockedBlock] {
        var blocks: [Int: LockedBlock] = [:]
        let count = whole.count
        for index in 0..<BlockMap.blockCount(count) {
            let start = index * blockBytes
            var block = try SecureBuffer(capacity: blockBytes)
            try whole.withUnsafeBytes { (bytes) throws(VaultError) in
                try block.append(UnsafeRawBufferPointer(rebasing: bytes[start..<min(start + blockBytes, count)]))
            }
            blocks[index] = LockedBlock(block)
        }
        return blocks
    }

    /// Whether block `index` holds stored bytes that are not here yet.
    private func needsLoad(_ index: Int) -> Bool {
        guard blocks[index] == nil, let map else { return false }
        return index * ItemContent.blockBytes < min(shortest, storedSize) && map.generation(of: index) != 0
    }

    private func load(_ indices: some Sequence<Int>, from vault: Vault) throws(VaultError) {
        let wanted = indices.filter(needsLoad)
        guard !wanted.isEmpty else { return }
        try vault.loadBlocks(wanted, into: self)
    }

    /// A block `Vault.loadBlocks` opened.
    func received(_ index: Int, _ block: consuming SecureBuffer) {
        blocks[index] = LockedBlock(block)
    }

    // MARK: what the driver calls

    /// Hands bytes `offset..<offset + size` (within the size) to `reply`: straight from the
    /// block when they lie in one, else gathered in `scratch`, which is wiped after.
    public func read(from vault: Vault, offset: Int, size: Int, scratch: ContentScratch,
                     reply: (UnsafeRawBufferPointer) -> Void) throws(VaultError) {
        let B = ItemContent.blockBytes
        let wantedEnd = min(max(offset, 0), count) + max(size, 0)
        var start = min(max(offset, 0), count)
        var end = min(wantedEnd, count)
        guard start < end else { return reply(UnsafeRawBufferPointer(start: nil, count: 0)) }
        try load(start / B ... (end - 1) / B, from: vault)
        // A load may have taken a newer version of another size.
        start = min(start, count)
        end = min(end, count)
        guard start < end else { return reply(UnsafeRawBufferPointer(start: nil, count: 0)) }
        let first = start / B, last = (end - 1) / B
        if first == last, let block = blocks[first] {
            block.bytes.withPaddedBytes(B) { bytes in reply(UnsafeRawBufferPointer(rebasing: bytes[(start - first * B)..<(end - first * B)])) }
            return
        }
        try scratch.gather(end - start) { (out) in
            for index in first...last {
                let from = max(start, index * B), to = min(end, index * B + B)
                guard let block = blocks[index] else { continue }  // a hole: the scratch is zeros
                block.bytes.withPaddedBytes(B) { bytes in
                    out.baseAddress!.advanced(by: from - start).copyMemory(from: bytes.baseAddress!.advanced(by: from - index * B),
                                                                           byteCount: to - from)
                }
            }
        }
        scratch.withGathered(reply)
    }

    /// Writes `bytes` at `offset`, growing the content (a gap reads as zeros).
    public func write(from vault: Vault, _ bytes: UnsafeRawBufferPointer, at offset: Int) throws(VaultError) {
        guard !bytes.isEmpty else { return }
        let B = ItemContent.blockBytes
        let end = offset + bytes.count
        let first = offset / B, last = (end - 1) / B
        // Only the blocks written in part keep stored bytes; those written over are not read.
        let partial = Set([first, last]).filter { index in
            let blockStart = index * B
            return !(offset <= blockStart && end >= min(blockStart + B, count))
        }
        try load(partial.sorted(), from: vault)
        for index in first...last {
            let blockStart = index * B
            let from = max(offset, blockStart), to = min(end, blockStart + B)
            let block: LockedBlock
            if let held = blocks[index] { block = held } else {
                block = LockedBlock(try SecureBuffer(capacity: B))
                blocks[index] = block
            }
            try block.bytes.write(UnsafeRawBufferPointer(rebasing: bytes[(from - offset)..<(to - offset)]), at: from - blockStart)
            dirty.insert(index)
        }
        count = max(count, end)
    }

    /// Truncates (the cut bytes wiped) or extends with zeros, as ftruncate does.
    public func resize(from vault: Vault, to newCount: Int) throws(VaultError) {
        let B = ItemContent.blockBytes
        if newCount < count {
            let cut = newCount / B
            if newCount % B != 0 { try load([cut], from: vault) }
            let kept = BlockMap.blockCount(newCount)
            for index in Array(blocks.keys) where index >= kept { blocks[index] = nil }
            dirty = dirty.filter { $0 < kept }
            if newCount % B != 0, let block = blocks[cut], block.bytes.count > newCount - cut * B {
                block.bytes.setCount(newCount - cut * B)
                dirty.insert(cut)
            }
            shortest = min(shortest, newCount)
        }
        count = newCount
    }

    /// Every stored block brought here: for an item about to be unlinked, whose descriptors
    /// keep reading what the vault no longer holds.
    public func loadAll(from vault: Vault) throws(VaultError) {
        try load(0..<BlockMap.blockCount(count), from: vault)
    }

    /// Wipes every block held (a lock, the last close); the content is read again to be used.
    public func wipe() {
        blocks.removeAll()
        dirty.removeAll()
    }

    /// The driver took `adoptedNode`.
    public func clearAdopted() { adoptedNode = nil }

    // MARK: what the vault calls while storing and loading

    /// The item was stored anew elsewhere (`whole` is that version): a content with no writes
    /// of its own takes it as it is; one with writes keeps them, block by block, over it, and
    /// keeps cut what it cut, as its store will write.
    func rebase(onto record: NodeRecord, whole: borrowing SecureBuffer) throws(VaultError) {
        let stored = try ItemContent.split(whole)
        if dirty.isEmpty {
            blocks = stored
            count = whole.count
            shortest = count
            adoptedNode = record.node
        } else {
            let kept = min(shortest, whole.count)
            for index in Array(blocks.keys) where !dirty.contains(index) { blocks[index] = nil }
            for (index, block) in stored where !dirty.contains(index) && index * ItemContent.blockBytes < kept
                && index < BlockMap.blockCount(count) {
                blocks[index] = block
            }
        }
        version = record.attributes.contentGeneration
        storedSize = whole.count
        map = nil
    }

    /// What a store needs that is not here: the first block of a blocked content that becomes
    /// small, which is then stored whole.
    func prepareToStore(from vault: Vault) throws(VaultError) {
        if !NodeStore.isBlocked(count) && count > 0 { try load([0], from: vault) }
    }

    /// Seals this content as version `generation` inside the store's write: the content record
    /// (whole when small, else the map), with the changed blocks stored and the cut ones
    /// deleted. Gives the record and the new map (nil when stored whole).
    func seal(_ store: NodeStore, _ place: RecordPlace, generation: UInt64,
              accessibility: AccessibilityClass) throws(VaultError) -> (sealed: [UInt8], map: BlockMap?) {
        let B = ItemContent.blockBytes
        let storedRows = map != nil || NodeStore.isBlocked(storedSize)
        guard NodeStore.isBlocked(count) else {
            var whole = try SecureBuffer(capacity: max(count, 1))
            if let block = blocks[0] {
                try block.bytes.withPaddedBytes(B) { (bytes) throws(VaultError) in
                    try whole.append(UnsafeRawBufferPointer(rebasing: bytes[..<count]))
                }
            } else {
                try whole.resize(to: count)
            }
            if storedRows { try store.storage.deleteContentBlocks(of: id, from: 0) }
            return (try store.cipher.sealContent(whole, place, generation: generation, accessibility: accessibility), nil)
        }
        let blockCount = BlockMap.blockCount(count)
        var generations = [UInt64](repeating: 0, count: blockCount)
        for index in 0..<blockCount {
            if let map {
                if dirty.contains(index) {
                    generations[index] = generation
                } else if index * B < min(shortest, storedSize) {
                    generations[index] = map.generation(of: index)
                }
            } else if blocks[index] != nil {
                generations[index] = generation
            }
        }
        if map == nil {
            if NodeStore.isBlocked(storedSize) { try store.storage.deleteContentBlocks(of: id, from: 0) }
        } else if shortest < storedSize {
            try store.storage.deleteContentBlocks(of: id, from: BlockMap.blockCount(shortest))
        }
        for index in 0..<blockCount where generations[index] == generation {
            guard let block = blocks[index] else { continue }
            let length = min(B, count - index * B)
            if block.bytes.count != length { block.bytes.setCount(length) }
            try store.storage.upsertContentBlock(ContentBlockRow(index: index, sealed: store.cipher.sealBlock(
                block.bytes, index: index, place, generation: generation, accessibility: accessibility)), of: id)
        }
        let newMap = BlockMap(generations: generations)
        return (try store.cipher.sealBlockMap(newMap, place, contentGeneration: generation, accessibility: accessibility), newMap)
    }

    /// The store committed: this content is version `generation` now.
    func didStore(generation: UInt64, map newMap: BlockMap?) {
        version = generation
        storedSize = count
        shortest = count
        map = newMap
        dirty.removeAll()
    }
}

/// One block's locked bytes: a class, so the map of blocks can hold a non-copyable buffer.
final class LockedBlock {
    var bytes: SecureBuffer
    init(_ bytes: consuming SecureBuffer) { self.bytes = bytes }
}

/// Locked memory a read that spans blocks gathers its bytes in, kept by the driver (one per
/// mount, used under its mutex) and wiped after each reply.
public final class ContentScratch: @unchecked Sendable {
    private var buffer: SecureBuffer

    public init() { buffer = SecureBuffer() }

    func gather(_ count: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Void) throws(VaultError) {
        try buffer.reserve(count)
        buffer.withUnsafeMutableStorage { (storage) -> Int in
            fill(UnsafeMutableRawBufferPointer(rebasing: storage[..<count]))
            return count
        }
    }

    /// Hands the gathered bytes to `body`, then wipes them.
    func withGathered(_ body: (UnsafeRawBufferPointer) -> Void) {
        buffer.withUnsafeBytes(body)
        buffer.setCount(0)
    }
}
