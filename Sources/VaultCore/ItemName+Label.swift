/// Readable item names made from a Secret Service label, whose bytes stay in locked memory
/// (no String is made of them): what a new item is called in its collection's dictionary.
extension ItemName {
    private static let underscore = UInt8(ascii: "_")
    private static let space = UInt8(ascii: " ")
    private static let fallback: StaticString = "item"

    /// The label made a name, before any number is added: UTF-8 kept, '/', control characters
    /// and invalid sequences each made '_', spaces trimmed at both ends, a leading '.' made '_'
    /// (no hidden files, no "." or ".."), "item" when nothing is left. Not yet cut to fit.
    public static func base(fromLabel label: borrowing SecureBuffer) throws(VaultError) -> SecureBuffer {
        // Each scalar or bad sequence becomes itself or one '_': never longer than the label.
        var base = try SecureBuffer(capacity: max(label.count, fallback.utf8CodeUnitCount))
        label.withUnsafeBytes { input in
            base.withUnsafeMutableStorage { storage -> Int in
                var used = 0
                func put(_ byte: UInt8) {
                    storage[used] = byte
                    used += 1
                }
                var iterator = input.makeIterator()
                var decoder = UTF8()
                decoding: while true {
                    switch decoder.decode(&iterator) {
                    case .scalarValue(let scalar):
                        if scalar == "/" || isControl(scalar) { put(underscore) } else { UTF8.encode(scalar, into: put) }
                    case .error:
                        put(underscore)
                    case .emptyInput:
                        break decoding
                    }
                }
                var start = 0
                while start < used && storage[start] == space { start += 1 }
                while used > start && storage[used - 1] == space { used -= 1 }
                let kept = used - start
                // What is left past the returned count is wiped (`withUnsafeMutableStorage`).
                if start > 0 { storage.baseAddress!.copyMemory(from: storage.baseAddress! + start, byteCount: kept) }
                guard kept > 0 else {
                    fallback.withUTF8Buffer { storage.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                    return fallback.utf8CodeUnitCount
                }
                if storage[0] == UInt8(ascii: ".") { storage[0] = underscore }
                return kept
            }
        }
        return base
    }

    /// `base` with " `number`" after it (nothing for 1), `base` cut on a character boundary
    /// (and its trailing spaces trimmed) so that the whole fits in `maximumBytes`.
    public init(base: borrowing SecureBuffer, number: Int) throws(VaultError) {
        let suffix = number > 1 ? Array(" \(number)".utf8) : []
        var name = try SecureBuffer(capacity: ItemName.maximumBytes)
        base.withUnsafeBytes { bytes in
            var cut = min(bytes.count, ItemName.maximumBytes - suffix.count)
            // A UTF-8 continuation byte (10xxxxxx) is never where a character begins.
            while cut > 0 && cut < bytes.count && bytes[cut] & 0xC0 == 0x80 { cut -= 1 }
            while cut > 0 && bytes[cut - 1] == ItemName.space { cut -= 1 }
            name.withUnsafeMutableStorage { storage in
                storage.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[..<cut]))
                for (offset, byte) in suffix.enumerated() { storage[cut + offset] = byte }
                return cut + suffix.count
            }
        }
        self = try name.withUnsafeBytes { (bytes) throws(VaultError) in try ItemName(bytes: bytes) }
    }

    /// C0 and C1 controls and DEL: invisible in a listing, and a terminal may act on them.
    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }
}
