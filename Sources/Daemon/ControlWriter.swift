import VaultCore

/// Builds the payload of a command line's request or of its reply, in locked memory: fields
/// in a fixed order per request (ControlRequest), integers little-endian, byte strings as a
/// u32 length and the bytes, an absent value as a 0 byte and a present one as 1 and the value.
/// The same layout as the archive's records (ArchiveRecord), which an export carries as is.
package struct ControlWriter: ~Copyable {
    package private(set) var buffer: SecureBuffer

    package init() throws(VaultError) {
        buffer = try SecureBuffer(capacity: 256)
    }

    package mutating func integer<T: FixedWidthInteger>(_ value: T) throws(VaultError) {
        var little = value.littleEndian
        try withUnsafeBytes(of: &little) { (raw) throws(VaultError) in try buffer.append(raw) }
    }

    package mutating func flag(_ value: Bool) throws(VaultError) { try integer(UInt8(value ? 1 : 0)) }

    package mutating func bytes(_ bytes: UnsafeRawBufferPointer) throws(VaultError) {
        try integer(UInt32(bytes.count))
        try buffer.append(bytes)
    }

    /// Bytes without a length: a reply that is nothing else.
    package mutating func raw(_ bytes: UnsafeRawBufferPointer) throws(VaultError) {
        try buffer.append(bytes)
    }

    package mutating func secret(_ value: borrowing SecureBuffer) throws(VaultError) {
        try value.withUnsafeBytes { (raw) throws(VaultError) in try bytes(raw) }
    }

    package mutating func optionalSecret(_ value: borrowing SecureBuffer?) throws(VaultError) {
        switch value {
        case .some(let present):
            try flag(true)
            try secret(present)
        case .none:
            try flag(false)
        }
    }

    /// Text that is no secret (an executable's path, a unit, a reason).
    package mutating func text(_ value: String) throws(VaultError) {
        let utf8 = Array(value.utf8)
        try utf8.withUnsafeBytes { raw in Result { () throws(VaultError) in try bytes(raw) } }.get()
    }

    package mutating func optionalText(_ value: String?) throws(VaultError) {
        try flag(value != nil)
        if let value { try text(value) }
    }

    package mutating func name(_ name: ItemName) throws(VaultError) {
        try name.withUnsafeBytes { (raw) throws(VaultError) in try bytes(raw) }
    }

    package mutating func attributeName(_ name: AttributeName) throws(VaultError) {
        try name.withUnsafeBytes { (raw) throws(VaultError) in try bytes(raw) }
    }

    package mutating func path(_ path: VaultPath) throws(VaultError) {
        try integer(UInt32(path.components.count))
        for component in path.components { try name(component) }
    }

    package mutating func optionalPath(_ path: VaultPath?) throws(VaultError) {
        try flag(path != nil)
        if let path { try self.path(path) }
    }

    package mutating func attributes(_ attributes: [Attribute]) throws(VaultError) {
        try integer(UInt32(attributes.count))
        for attribute in attributes {
            try attributeName(attribute.name)
            try secret(attribute.value)
        }
    }

    package mutating func timestamp(_ time: Timestamp) throws(VaultError) {
        try integer(time.seconds)
        try integer(time.nanoseconds)
    }

    /// A class, or 0xFF for none.
    package mutating func accessibility(_ value: AccessibilityClass?) throws(VaultError) {
        try integer(value?.rawValue ?? 0xFF)
    }

    package consuming func finish() -> SecureBuffer { buffer }
}
