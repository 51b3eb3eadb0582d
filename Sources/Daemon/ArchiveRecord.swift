import Glibc
import VaultCore

/// The records inside an archive's encrypted stream (version 1), each one stream message:
/// a type byte, then the fields in a fixed order, integers little-endian, byte strings with a
/// length before them. Built and parsed in locked memory only.
///
///     dictionary (1): path, default class, label?, attributes, rules
///     item (2):       path, class, label?, content type?, attributes, rules, content
///     end (3):        the number of entries before it; the only message tagged FINAL
///     path:       u16 count, then each name as u16 length + bytes
///     class:      u8 (AccessibilityClass raw value; 0xFF: none)
///     X?:         u8 0 (absent) or 1 + u32 length + bytes
///     attributes: u32 count, then each u16 name length + name + u32 value length + value
///     rules:      u16 count, then each u8 kind (1 exe, 2 unit) + u16 length + UTF-8 + u8 flags (1 read-only, 2 confirm)
///     content:    u32 length + bytes
package enum ArchiveRecord {
    package static let dictionaryType: UInt8 = 1
    package static let itemType: UInt8 = 2
    package static let endType: UInt8 = 3
    private static let noClass: UInt8 = 0xFF

    // MARK: writing

    package static func encode(_ entry: PortableEntry, into buffer: inout SecureBuffer) throws(VaultError) {
        buffer.setCount(0)
        try put(entry.kind == .item ? itemType : dictionaryType, &buffer)
        try put(UInt16(entry.path.components.count), &buffer)
        for name in entry.path.components {
            try name.withUnsafeBytes { (bytes) throws(VaultError) in try putBytes(bytes, lengthBytes: 2, &buffer) }
        }
        try put(entry.accessibility?.rawValue ?? noClass, &buffer)
        try putOptional(entry.label, &buffer)
        if entry.kind == .item { try putOptional(entry.contentType, &buffer) }
        try put(UInt32(entry.attributes.count), &buffer)
        for attribute in entry.attributes {
            try attribute.name.withUnsafeBytes { (bytes) throws(VaultError) in try putBytes(bytes, lengthBytes: 2, &buffer) }
            try attribute.value.withUnsafeBytes { (bytes) throws(VaultError) in try putBytes(bytes, lengthBytes: 4, &buffer) }
        }
        try put(UInt16(entry.rules.count), &buffer)
        for rule in entry.rules {
            let (kind, subject): (UInt8, String) = switch rule.principal {
            case .executable(let path, _, _, _): (1, path)
            case .unit(let name): (2, name)
            }
            try put(kind, &buffer)
            try putBytes(Array(subject.utf8), &buffer)
            try put(UInt8((rule.readOnly ? 1 : 0) | (rule.confirm ? 2 : 0)), &buffer)
        }
        if entry.kind == .item {
            switch entry.content {
            case .some(let content): try content.withUnsafeBytes { (bytes) throws(VaultError) in try putBytes(bytes, lengthBytes: 4, &buffer) }
            case .none: try put(UInt32(0), &buffer)
            }
        }
    }

    package static func encodeEnd(count: Int, into buffer: inout SecureBuffer) throws(VaultError) {
        buffer.setCount(0)
        try put(endType, &buffer)
        try put(UInt64(count), &buffer)
    }

    private static func put<T: FixedWidthInteger>(_ value: T, _ buffer: inout SecureBuffer) throws(VaultError) {
        try buffer.reserve(buffer.count + MemoryLayout<T>.size)
        withUnsafeBytes(of: value.littleEndian) { try! buffer.append($0) }  // fits: reserved above
    }

    private static func putBytes(_ bytes: UnsafeRawBufferPointer, lengthBytes: Int, _ buffer: inout SecureBuffer) throws(VaultError) {
        if lengthBytes == 2 { try put(UInt16(bytes.count), &buffer) } else { try put(UInt32(bytes.count), &buffer) }
        try buffer.append(bytes)
    }

    private static func putBytes(_ bytes: [UInt8], _ buffer: inout SecureBuffer) throws(VaultError) {
        try put(UInt16(bytes.count), &buffer)
        try buffer.reserve(buffer.count + bytes.count)
        bytes.withUnsafeBytes { try! buffer.append($0) }  // fits: reserved above
    }

    private static func putOptional(_ value: borrowing SecureBuffer?, _ buffer: inout SecureBuffer) throws(VaultError) {
        switch value {
        case .some(let value):
            try put(UInt8(1), &buffer)
            try value.withUnsafeBytes { (bytes) throws(VaultError) in try putBytes(bytes, lengthBytes: 4, &buffer) }
        case .none:
            try put(UInt8(0), &buffer)
        }
    }

    // MARK: reading

    /// What one message held.
    package enum Decoded {
        case entry(PortableEntry)
        case end(count: Int)
    }

    package static func decode(_ bytes: UnsafeRawBufferPointer) throws(VaultError) -> Decoded {
        var reader = Reader(bytes: bytes)
        let type = try reader.integer(UInt8.self)
        if type == endType {
            let count = try reader.integer(UInt64.self)
            try reader.finish()
            return .end(count: Int(clamping: count))
        }
        guard type == itemType || type == dictionaryType else { throw malformed("unknown record type \(type)") }
        var components: [ItemName] = []
        for _ in 0..<(try reader.integer(UInt16.self)) { components.append(try ItemName(bytes: try reader.bytes(lengthBytes: 2))) }
        let path = VaultPath(components: components)
        let classByte = try reader.integer(UInt8.self)
        var accessibility: AccessibilityClass? = nil
        if classByte != noClass {
            guard let known = AccessibilityClass(rawValue: classByte) else { throw malformed("unknown class \(classByte)") }
            accessibility = known
        }
        let label = try reader.optional()
        let contentType = type == itemType ? try reader.optional() : nil
        var attributes: [Attribute] = []
        for _ in 0..<(try reader.integer(UInt32.self)) {
            let name = try AttributeName(bytes: try reader.bytes(lengthBytes: 2))
            attributes.append(Attribute(name: name, value: try SecureBuffer(copying: try reader.bytes(lengthBytes: 4))))
        }
        var rules: [AccessRule] = []
        for _ in 0..<(try reader.integer(UInt16.self)) {
            let kind = try reader.integer(UInt8.self)
            guard let subject = String(validating: try reader.bytes(lengthBytes: 2), as: UTF8.self) else { throw malformed("a rule is not UTF-8") }
            let flags = try reader.integer(UInt8.self)
            rules.append(AccessRule(try principal(kind: kind, subject), readOnly: flags & 1 != 0, confirm: flags & 2 != 0))
        }
        guard type == itemType else {
            try reader.finish()
            return .entry(PortableEntry(dictionary: path, attributes: attributes, label: label, defaultClass: accessibility, rules: rules))
        }
        let content = try SecureBuffer(copying: try reader.bytes(lengthBytes: 4))
        try reader.finish()
        return .entry(PortableEntry(item: path, content: content, attributes: attributes, label: label, contentType: contentType,
                                    accessibility: accessibility, rules: rules))
    }

    /// An executable rule names the file at its path on this machine, as `allow --exe` would;
    /// with no file there it admits nothing until one appears, and `rules` marks it changed.
    private static func principal(kind: UInt8, _ subject: String) throws(VaultError) -> Principal {
        switch kind {
        case 1:
            guard subject.hasPrefix("/") else { throw malformed("an executable rule's path is not absolute") }
            do throws(AccessRuleError) {
                return try Principal.executable(at: subject)
            } catch {
                return .executable(path: subject, device: 0, inode: 0, fingerprint: nil)
            }
        case 2:
            guard !subject.isEmpty, !subject.contains("/") else { throw malformed("a unit rule's name is not a unit") }
            return .unit(subject)
        default:
            throw malformed("unknown rule kind \(kind)")
        }
    }

    package static func malformed(_ detail: String) -> VaultError {
        .invalidArgument("the archive is damaged or was changed (\(detail)); nothing was imported")
    }

    /// Reads the fields of one decrypted message in order, every length checked against what is left.
    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        var offset = 0

        mutating func integer<T: FixedWidthInteger>(_: T.Type) throws(VaultError) -> T {
            let size = MemoryLayout<T>.size
            guard bytes.count - offset >= size else { throw ArchiveRecord.malformed("a record is cut short") }
            var value = T.zero
            withUnsafeMutableBytes(of: &value) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + size])) }
            offset += size
            return T(littleEndian: value)
        }

        mutating func bytes(lengthBytes: Int) throws(VaultError) -> UnsafeRawBufferPointer {
            let length = lengthBytes == 2 ? Int(try integer(UInt16.self)) : Int(try integer(UInt32.self))
            guard bytes.count - offset >= length else { throw ArchiveRecord.malformed("a record is cut short") }
            defer { offset += length }
            return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + length])
        }

        mutating func optional() throws(VaultError) -> SecureBuffer? {
            switch try integer(UInt8.self) {
            case 0: return nil
            case 1: return try SecureBuffer(copying: try bytes(lengthBytes: 4))
            default: throw ArchiveRecord.malformed("a presence byte is neither 0 nor 1")
            }
        }

        func finish() throws(VaultError) {
            guard offset == bytes.count else { throw ArchiveRecord.malformed("a record has bytes past its end") }
        }
    }
}
