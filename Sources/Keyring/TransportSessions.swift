import DBus
import VaultCore

/// The open sessions, by number. Bounded per client and in all, so a client that opens
/// sessions in a loop runs out, not the service.
struct TransportSessions {
    static let perClient = 64
    static let total = 4096

    private var sessions: [UInt64: TransportSession] = [:]
    private var nextID: UInt64 = 1

    mutating func open(owner: String, key: consuming TransportKey?) throws(BusError) -> TransportSession {
        guard sessions.count < TransportSessions.total,
              sessions.values.count(where: { $0.owner == owner }) < TransportSessions.perClient else {
            throw .limitsExceeded("too many open sessions; close some first")
        }
        let session = TransportSession(id: nextID, owner: owner, key: key)
        nextID += 1
        sessions[session.id] = session
        return session
    }

    /// The caller's own session at `path`: another client's, a closed one or no session at
    /// all is NoSession, as the spec asks.
    func session(at path: String, for caller: String) throws(BusError) -> TransportSession {
        guard case .session(let id)? = SecretObject(path: path), let session = sessions[id], session.owner == caller else {
            throw .noSession("\(path) is not a session of this client")
        }
        return session
    }

    func exists(_ id: UInt64) -> Bool { sessions[id] != nil }

    func owner(of id: UInt64) -> String? { sessions[id]?.owner }

    mutating func close(_ id: UInt64) { sessions[id] = nil }

    mutating func closeAll(ownedBy owner: String) {
        sessions = sessions.filter { $0.value.owner != owner }
    }

    /// Reads a Secret struct `(oayays)` sent by `caller`: the value in locked memory and the
    /// content type (nil when empty).
    func readSecret(_ reader: inout BusReader, caller: String) throws(BusError) -> ReceivedSecret {
        try reader.enter("r", "oayays")
        let session = try session(at: try reader.objectPath(), for: caller)
        let parameters = try reader.bytes()
        let content = try session.open(parameters: parameters, from: &reader)
        let contentType = try reader.secretString()
        try reader.exit()
        guard contentType.count > 0 else { return ReceivedSecret(content: content, contentType: nil) }
        return ReceivedSecret(content: content, contentType: contentType)
    }
}

/// A secret as a client sent it, decrypted into locked memory. A class so that a call
/// waiting for a confirmation can carry it to the loop thread's later work.
final class ReceivedSecret: @unchecked Sendable {
    let content: SecureBuffer
    var contentType: SecureBuffer?

    init(content: consuming SecureBuffer, contentType: consuming SecureBuffer?) {
        self.content = content
        self.contentType = contentType
    }
}
