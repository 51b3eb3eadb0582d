import DBus
import VaultCore

/// One client's session (OpenSession): how secrets cross the bus to and from that client,
/// in the clear (`plain`) or under the AES key agreed with it. Only its owner may use it.
/// Used on the loop thread only (a reply built after a confirmation is built there too).
final class TransportSession: @unchecked Sendable {
    let id: UInt64
    /// The unique bus name of the client that opened it.
    let owner: String
    private let key: KeyHolder?

    /// The session key, owned here and wiped with the session.
    private final class KeyHolder {
        let key: TransportKey
        init(_ key: consuming TransportKey) { self.key = key }
    }

    init(id: UInt64, owner: String, key: consuming TransportKey?) {
        self.id = id
        self.owner = owner
        if let key { self.key = KeyHolder(key) } else { self.key = nil }
    }

    var path: String { SecretObject.session(id).path }

    /// Writes a Secret struct `(oayays)`: session, parameters (the IV), value, content type.
    func write(_ content: borrowing SecureBuffer, contentType: borrowing SecureBuffer?, to writer: inout BusWriter) throws(BusError) {
        try writer.open("r", "oayays")
        try writer.objectPath(path)
        if let key {
            let sealed: (iv: [UInt8], ciphertext: [UInt8])
            do throws(TransportError) {
                sealed = try key.key.encrypt(content)
            } catch {
                throw .failed(error.message)
            }
            try writer.bytes(sealed.iv)
            try writer.bytes(sealed.ciphertext)
        } else {
            try writer.bytes(UnsafeRawBufferPointer(start: nil, count: 0))
            try content.withUnsafeBytes { (value) throws(BusError) in try writer.bytes(value) }
        }
        switch contentType {
        case .some(let type): try writer.string(secret: type)
        case .none: try writer.string("text/plain")
        }
        try writer.close()
    }

    /// The value of a Secret struct sent by the client, its parameters already read.
    func open(parameters: [UInt8], from reader: inout BusReader) throws(BusError) -> SecureBuffer {
        guard let key else {
            guard parameters.isEmpty else { throw .invalidArgs("a plain session's secret has no parameters") }
            return try reader.secretBytes()
        }
        let ciphertext = try reader.bytes()
        do throws(TransportError) {
            return try key.key.decrypt(iv: parameters, ciphertext: ciphertext)
        } catch {
            throw .invalidArgs(error.message)
        }
    }
}
