import CSodium
import CSystemd
import Glibc
import SystemCalls
import SystemPackage
import VaultCore

/// Appends to a message being built (a reply or a signal), which is marked sensitive so
/// sd-bus wipes it when freed. A failure to append leaves the message unusable: the caller
/// drops it (BusCall then sends the error instead).
package struct BusWriter {
    private let message: OpaquePointer

    package init(message: OpaquePointer) {
        self.message = message
    }

    package mutating func string(_ s: String) throws(BusError) {
        let rc = s.withCString { sd_bus_message_append_basic(message, BusReader.code("s"), $0) }
        guard rc >= 0 else { throw BusWriter.failure("a string", rc) }
    }

    /// A secret string from locked memory. sd-bus wants it NUL-terminated, which the buffer is
    /// not: it goes through a temporary that is wiped at once.
    package mutating func string(secret: borrowing SecureBuffer) throws(BusError) {
        let message = self.message
        try secret.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws(BusError) in
            // D-Bus strings end at the first NUL; a secret holding one would arrive cut short.
            if bytes.count > 0 && memchr(bytes.baseAddress!, 0, bytes.count) != nil {
                throw .failed("a string to send holds a NUL byte, which D-Bus strings cannot")
            }
            let temporary = UnsafeMutableRawPointer.allocate(byteCount: bytes.count + 1, alignment: 1)
            defer {
                sodium_memzero(temporary, bytes.count + 1)
                temporary.deallocate()
            }
            if bytes.count > 0 { temporary.copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
            temporary.storeBytes(of: 0, toByteOffset: bytes.count, as: UInt8.self)
            let rc = sd_bus_message_append_basic(message, BusReader.code("s"), temporary)
            guard rc >= 0 else { throw BusWriter.failure("a string", rc) }
        }
    }

    package mutating func objectPath(_ p: String) throws(BusError) {
        let rc = p.withCString { sd_bus_message_append_basic(message, BusReader.code("o"), $0) }
        guard rc >= 0 else { throw BusWriter.failure("the object path \(p)", rc) }
    }

    package mutating func bool(_ b: Bool) throws(BusError) {
        var value: Int32 = b ? 1 : 0
        let rc = sd_bus_message_append_basic(message, BusReader.code("b"), &value)
        guard rc >= 0 else { throw BusWriter.failure("a boolean", rc) }
    }

    package mutating func uint32(_ v: UInt32) throws(BusError) {
        var value = v
        let rc = sd_bus_message_append_basic(message, BusReader.code("u"), &value)
        guard rc >= 0 else { throw BusWriter.failure("a uint32", rc) }
    }

    package mutating func uint64(_ v: UInt64) throws(BusError) {
        var value = v
        let rc = sd_bus_message_append_basic(message, BusReader.code("t"), &value)
        guard rc >= 0 else { throw BusWriter.failure("a uint64", rc) }
    }

    /// `ay`.
    package mutating func bytes(_ b: UnsafeRawBufferPointer) throws(BusError) {
        let rc = sd_bus_message_append_array(message, BusReader.code("y"), b.baseAddress, b.count)
        guard rc >= 0 else { throw BusWriter.failure("a byte array", rc) }
    }

    /// `ay` from locked memory (the message copy is wiped with the message).
    package mutating func bytes(secret: borrowing SecureBuffer) throws(BusError) {
        let message = self.message
        try secret.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws(BusError) in
            let rc = sd_bus_message_append_array(message, BusReader.code("y"), bytes.baseAddress, bytes.count)
            guard rc >= 0 else { throw BusWriter.failure("a byte array", rc) }
        }
    }

    /// Opens a container, as BusReader.enter: open("a", "{sv}"), open("e", "sv"), open("v", "s").
    package mutating func open(_ type: Character, _ contents: String) throws(BusError) {
        let rc = sd_bus_message_open_container(message, BusReader.code(type), contents)
        guard rc >= 0 else { throw BusWriter.failure("a container \(BusReader.signature(type, contents))", rc) }
    }

    package mutating func close() throws(BusError) {
        let rc = sd_bus_message_close_container(message)
        guard rc >= 0 else { throw BusWriter.failure("the end of a container", rc) }
    }

    /// sd-bus refuses what does not fit the signature being built, invalid UTF-8 and
    /// malformed object paths with EINVAL or ENXIO.
    private static func failure(_ what: String, _ rc: Int32) -> BusError {
        .failed("cannot append \(what) to a D-Bus message: \(Errno(negatedReturn: rc))")
    }
}
