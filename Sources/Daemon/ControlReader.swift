import VaultCore

/// Reads what ControlWriter built, every length checked against what is left; the bytes it
/// hands out point into the buffer it reads, which must outlive them.
package struct ControlReader {
    private let storage: UnsafeRawBufferPointer
    private var offset = 0

    package init(_ bytes: UnsafeRawBufferPointer) {
        storage = bytes
    }

    static func malformed(_ detail: String) -> VaultError {
        .invalidArgument("malformed control message (\(detail))")
    }

    package mutating func integer<T: FixedWidthInteger>(_: T.Type) throws(VaultError) -> T {
        let size = MemoryLayout<T>.size
        guard storage.count - offset >= size else { throw Self.malformed("cut short") }
        var value = T.zero
        withUnsafeMutableBytes(of: &value) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: storage[offset..<offset + size])) }
        offset += size
        return T(littleEndian: value)
    }

    package mutating func flag() throws(VaultError) -> Bool {
        switch try integer(UInt8.self) {
        case 0: return false
        case 1: return true
        default: throw Self.malformed("a flag is neither 0 nor 1")
        }
    }

    package mutating func bytes() throws(VaultError) -> UnsafeRawBufferPointer {
        let length = Int(try integer(UInt32.self))
        guard storage.count - offset >= length else { throw Self.malformed("cut short") }
        defer { offset += length }
        return UnsafeRawBufferPointer(rebasing: storage[offset..<offset + length])
    }

    package mutating func secret() throws(VaultError) -> SecureBuffer {
        let raw = try bytes()
        var value = try SecureBuffer(capacity: max(raw.count, 1))
        try value.append(raw)
        return value
    }

    package mutating func optionalSecret() throws(VaultError) -> SecureBuffer? {
        try flag() ? try secret() : nil
    }

    package mutating func text() throws(VaultError) -> String {
        let raw = try bytes()
        guard let text = String(validating: raw, as: UTF8.self) else { throw Self.malformed("text that is not UTF-8") }
        return text
    }

    package mutating func optionalText() throws(VaultError) -> String? {
        try flag() ? try text() : nil
    }

    package mutating func name() throws(VaultError) -> ItemName { try ItemName(bytes: try bytes()) }

    package mutating func attributeName() throws(VaultError) -> AttributeName { try AttributeName(bytes: try bytes()) }

    package mutating func path() throws(VaultError) -> VaultPath {
        let count = Int(try integer(UInt32.self))
        guard count <= 4096 else { throw Self.malformed("a path too deep") }
        var components: [ItemName] = []
        for _ in 0..<count { components.append(try name()) }
        return VaultPath(components: components)
    }

    package mutating func optionalPath() throws(VaultError) -> VaultPath? {
        try flag() ? try path() : nil
    }

    package mutating func attributes() throws(VaultError) -> [Attribute] {
        let count = Int(try integer(UInt32.self))
        var attributes: [Attribute] = []
        for _ in 0..<min(count, 65536) {
            let name = try attributeName()
            attributes.append(Attribute(name: name, value: try secret()))
        }
        return attributes
    }

    package mutating func timestamp() throws(VaultError) -> Timestamp {
        let seconds = try integer(Int64.self)
        return Timestamp(seconds: seconds, nanoseconds: try integer(UInt32.self))
    }

    package mutating func accessibility() throws(VaultError) -> AccessibilityClass? {
        let raw = try integer(UInt8.self)
        if raw == 0xFF { return nil }
        guard let value = AccessibilityClass(rawValue: raw) else { throw Self.malformed("an unknown class") }
        return value
    }

    /// The rest, unread: an export's records.
    package var remaining: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: storage[offset...]) }

    package func finish() throws(VaultError) {
        guard offset == storage.count else { throw Self.malformed("bytes past its end") }
    }
}
