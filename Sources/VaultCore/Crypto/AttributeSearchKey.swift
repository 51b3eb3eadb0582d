/// The key of attributes' search tags, on its own: a lock keeps it, apart from every other key,
/// so a Secret Service client can learn which items it must ask to unlock. It tags (name, value)
/// pairs and opens nothing. Its buffer is wiped when the last holder lets it go.
struct AttributeSearchKey: Sendable {
    private let key: Subkey

    init(_ key: Subkey) {
        self.key = key
    }

    /// The search tag of a (name, value) pair: keyed BLAKE2b of the name's length, the name and
    /// the value, deliberately not bound to a node, so every node holding the same pair has the
    /// same tag and a search is one indexed query. (Someone with the file therefore sees which
    /// nodes share a pair, never the pair.) The length keeps ("ab", "c") apart from ("a", "bc").
    func tag(name: AttributeName, value: borrowing SecureBuffer) -> [UInt8] {
        var length: [UInt8] = []
        length.appendLittleEndian(UInt64(name.count))
        return length.withUnsafeBytes { lengthBytes in
            name.withUnsafeBytes { nameBytes in
                value.withUnsafeBytes { VaultKeys.keyedHash([lengthBytes, nameBytes, $0], key: key) }
            }
        }
    }
}
