import CSodium
import CSystemd
import Glibc
import SystemCalls
import SystemPackage
import VaultCore

/// Reads a message's body in order; each method checks the next type and throws
/// `.invalidArgs` on a mismatch, so a client's wrong signature is answered, never trusted.
///
/// The read position lives in the message itself: one reader at a time per message.
package struct BusReader {
    private let message: OpaquePointer
    /// Keeps the message alive for as long as the reader exists.
    private let owner: AnyObject

    package init(message: OpaquePointer, owner: AnyObject) {
        self.message = message
        self.owner = owner
    }

    /// The next element's type code and, for containers, its contents signature; nil at the
    /// end of the current container.
    package mutating func peek() throws(BusError) -> (type: Character, contents: String)? {
        var type: CChar = 0
        var contents: UnsafePointer<CChar>?
        let rc = sd_bus_message_peek_type(message, &type, &contents)
        guard rc >= 0 else { throw .invalidArgs("unreadable arguments: \(Errno(negatedReturn: rc))") }
        guard rc > 0 else { return nil }
        return (Character(Unicode.Scalar(UInt8(bitPattern: type))), contents.map { String(cString: $0) } ?? "")
    }

    /// For strings that are not secret (algorithm names, object paths given as strings).
    package mutating func string() throws(BusError) -> String {
        var value: UnsafePointer<CChar>?
        try readBasic("s", &value)
        return String(cString: value!)
    }

    package mutating func objectPath() throws(BusError) -> String {
        var value: UnsafePointer<CChar>?
        try readBasic("o", &value)
        return String(cString: value!)
    }

    package mutating func bool() throws(BusError) -> Bool {
        // sd-bus stores a D-Bus boolean in a C int.
        var value: Int32 = 0
        try readBasic("b", &value)
        return value != 0
    }

    package mutating func uint32() throws(BusError) -> UInt32 {
        var value: UInt32 = 0
        try readBasic("u", &value)
        return value
    }

    package mutating func uint64() throws(BusError) -> UInt64 {
        var value: UInt64 = 0
        try readBasic("t", &value)
        return value
    }

    /// A string that may be secret (a label, an attribute name or value), without its NUL:
    /// copied into locked memory, then wiped where sd-bus pointed (inside the message body),
    /// so that it no longer reads at all (sd-bus rejects a string with NUL bytes inside).
    package mutating func secretString() throws(BusError) -> SecureBuffer {
        var value: UnsafePointer<CChar>?
        try readBasic("s", &value)
        let start = UnsafeMutableRawPointer(mutating: value!)
        let length = strlen(value!)
        defer { sodium_memzero(start, length) }
        return try BusReader.secure(UnsafeRawBufferPointer(start: start, count: length))
    }

    /// `ay` that may be secret: copied into locked memory, then wiped in the message.
    package mutating func secretBytes() throws(BusError) -> SecureBuffer {
        let bytes = try readByteArray()
        defer { if let start = bytes.baseAddress { sodium_memzero(UnsafeMutableRawPointer(mutating: start), bytes.count) } }
        return try BusReader.secure(bytes)
    }

    /// `ay` that is not secret (a public key, an IV).
    package mutating func bytes() throws(BusError) -> [UInt8] {
        Array(try readByteArray())
    }

    /// Enters a container: `type` is "a", "e" (dict entry), "v" or "r"; `contents` the inner
    /// signature, as in enter("a", "{ss}"), enter("e", "ss"), enter("v", "s"), enter("r", "oayays").
    package mutating func enter(_ type: Character, _ contents: String) throws(BusError) {
        let rc = sd_bus_message_enter_container(message, BusReader.code(type), contents)
        guard rc > 0 else { throw mismatch(expected: BusReader.signature(type, contents)) }
    }

    /// Leaves the current container; the rest of an array is skipped, while a struct, dict
    /// entry or variant must have been read to its end.
    package mutating func exit() throws(BusError) {
        let rc = sd_bus_message_exit_container(message)
        guard rc >= 0 else { throw .invalidArgs("more arguments than expected inside a container") }
    }

    /// Skips the next complete element(s) of signature `types` (e.g. "v").
    package mutating func skip(_ types: String) throws(BusError) {
        let rc = sd_bus_message_skip(message, types)
        guard rc >= 0 else { throw mismatch(expected: types) }
    }

    /// True at the end of the current container (or of the body).
    package var atEnd: Bool {
        // An unreadable message counts as ended, so that a loop over it stops.
        sd_bus_message_at_end(message, 0) != 0
    }

    private mutating func readBasic(_ type: Character, _ value: UnsafeMutableRawPointer) throws(BusError) {
        let rc = sd_bus_message_read_basic(message, BusReader.code(type), value)
        guard rc > 0 else { throw mismatch(expected: String(type)) }
    }

    /// Points into the message body: valid while the message lives, writable (a received
    /// message is one heap buffer) for wiping. An empty array gives a dangling non-nil start.
    private mutating func readByteArray() throws(BusError) -> UnsafeRawBufferPointer {
        var start: UnsafeRawPointer?
        var size = 0
        let rc = sd_bus_message_read_array(message, BusReader.code("y"), &start, &size)
        guard rc > 0 else { throw mismatch(expected: "ay") }
        return UnsafeRawBufferPointer(start: size == 0 ? nil : start, count: size)
    }

    private mutating func mismatch(expected: String) -> BusError {
        let found: String
        if let next = try? peek() {
            found = "'" + BusReader.signature(next.type, next.contents) + "'"
        } else {
            found = "the end of the arguments"
        }
        return .invalidArgs("argument of type '\(expected)' expected, found \(found)")
    }

    private static func secure(_ bytes: UnsafeRawBufferPointer) throws(BusError) -> SecureBuffer {
        do {
            return try SecureBuffer(copying: bytes)
        } catch {
            throw .limitsExceeded("no locked memory left for a secret of \(bytes.count) bytes")
        }
    }

    /// The signature a container is written as: a{ss}, {ss}, v, (oayays).
    package static func signature(_ type: Character, _ contents: String) -> String {
        switch type {
        case "e": "{" + contents + "}"
        case "r": "(" + contents + ")"
        case "v": "v"
        default: String(type) + contents
        }
    }

    package static func code(_ type: Character) -> CChar {
        precondition(type.isASCII, "a D-Bus type code is ASCII")
        return CChar(bitPattern: type.asciiValue!)
    }
}
