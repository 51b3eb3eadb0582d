/// Which generation of an item holds each block of its content (format 9): 0 for a hole,
/// which is not stored and reads as zeros. Sealed as the node's content record
/// (`RecordCipher.sealBlockMap`); it names no content, only where each block was last written.
struct BlockMap: Equatable {
    var generations: [UInt64]

    static let blockBytes = VaultFormat.contentBlockBytes

    /// Blocks a content of `size` bytes spans.
    static func blockCount(_ size: Int) -> Int { (size + blockBytes - 1) / blockBytes }

    init(generations: [UInt64]) { self.generations = generations }

    /// Every block of a content of `size` bytes written at `generation`.
    init(size: Int, generation: UInt64) {
        generations = Array(repeating: generation, count: BlockMap.blockCount(size))
    }

    /// nil unless `bytes` holds exactly one generation per block of `size` bytes.
    init?(decoding bytes: [UInt8], size: Int) {
        let count = BlockMap.blockCount(size)
        guard bytes.count == count * 8 else { return nil }
        generations = (0..<count).map { index in
            (0..<8).reduce(UInt64(0)) { value, byte in value | UInt64(bytes[index * 8 + byte]) << (8 * UInt64(byte)) }
        }
    }

    func encoded() -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(generations.count * 8)
        for generation in generations { bytes.appendLittleEndian(generation) }
        return bytes
    }

    /// The generation of block `index`; 0 past the end (a hole).
    func generation(of index: Int) -> UInt64 { index < generations.count ? generations[index] : 0 }
}
