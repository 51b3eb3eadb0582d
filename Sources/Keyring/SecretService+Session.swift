import DBus
import VaultCore

/// org.freedesktop.Secret.Session: its declaration (from which dispatch, the signature check
/// and introspection come), Close, and the Service's OpenSession that makes one.
extension SecretService {
    typealias SessionObject = (service: SecretService, id: UInt64)

    static let sessionObject = BusObjectDeclaration<SessionObject>(called: "a session", interfaces: [
        BusInterface(sessionInterface, methods: [
            BusMethod("Close") { (object, call) throws(BusError) in try object.service.close(session: object.id, call) },
        ]),
    ])

    /// OpenSession(s algorithm, v input) → (v output, o result).
    func openSession(_ call: BusCall) throws(BusError) {
        var reader = call.arguments()
        let name = try reader.string()
        guard let algorithm = TransportAlgorithm(name: name) else {
            throw .notSupported("unsupported session algorithm; this service offers plain and dh-ietf1024-sha256-aes128-cbc-pkcs7")
        }
        switch algorithm {
        case .plain:
            // The input is an empty string; anything else is tolerated, as gnome-keyring does.
            let session = try sessions.open(owner: call.sender, key: nil)
            call.reply { (writer) throws(BusError) in
                try writer.open("v", "s")
                try writer.string("")
                try writer.close()
                try writer.objectPath(session.path)
            }
        case .dhIETF1024SHA256AES128CBCPKCS7:
            try reader.enter("v", "ay")
            let peer = try reader.bytes()
            try reader.exit()
            let ours: DHKeyAgreement
            let key: TransportKey
            do throws(TransportError) {
                ours = try DHKeyAgreement()
                key = try ours.sessionKey(peerPublicKey: peer)
            } catch {
                throw .invalidArgs(error.message)
            }
            let session = try sessions.open(owner: call.sender, key: key)
            let publicKey = ours.publicKey
            call.reply { (writer) throws(BusError) in
                try writer.open("v", "ay")
                try writer.bytes(publicKey)
                try writer.close()
                try writer.objectPath(session.path)
            }
        }
    }

    private func close(session id: UInt64, _ call: BusCall) throws(BusError) {
        guard sessions.owner(of: id) == call.sender else { throw .accessDenied("this session belongs to another client") }
        sessions.close(id)
        call.reply { _ in }
    }
}
