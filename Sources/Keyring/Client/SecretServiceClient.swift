import DBus
import VaultCore

/// A client of whoever owns org.freedesktop.secrets (gnome-keyring, KWallet, KeePassXC), for
/// `keychainfs import secret-service`: reads every collection and item, unlocking locked
/// collections through the service's own prompt. Single-threaded, as its connection is.
///
/// Secrets travel under the Diffie-Hellman session this project's service implements (its
/// `DHKeyAgreement` and `TransportKey`, used in the client's direction: the agreement is
/// symmetric); a service that refuses it is asked for a plain session, which the
/// specification makes every service offer.
package final class SecretServiceClient {
    /// The unique bus name of the service when the session was opened: every call goes there,
    /// so a service replaced meanwhile is never half read.
    package let service: String
    /// "dh-ietf1024-sha256-aes128-cbc-pkcs7" or "plain".
    package let algorithm: String
    private let bus: BusConnection
    private let sessionPath: String
    private let key: KeyHolder?

    private static let servicePath = "/org/freedesktop/secrets"
    /// The name every other implementation (libsecret, gnome-keyring, secretstorage) uses.
    static let dhAlgorithm = "dh-ietf1024-sha256-aes128-cbc-pkcs7"

    private final class KeyHolder {
        let key: TransportKey
        init(_ key: consuming TransportKey) { self.key = key }
    }

    /// Opens a session with the owner of org.freedesktop.secrets on `bus`; nobody owning it is
    /// a `serviceUnknown`-named BusError.
    package init(bus: BusConnection) throws(BusError) {
        self.bus = bus
        guard let owner = try bus.owner(ofName: SecretService.busName) else {
            throw BusError(name: "org.freedesktop.DBus.Error.ServiceUnknown", message: "nobody owns \(SecretService.busName) on the session bus")
        }
        service = owner.uniqueName
        let opened: (path: String, key: KeyHolder?, algorithm: String)
        do throws(BusError) {
            opened = try Self.openEncrypted(bus, service)
        } catch where error.name == "org.freedesktop.DBus.Error.NotSupported" {
            opened = try Self.openPlain(bus, service)
        }
        (sessionPath, key, algorithm) = opened
    }

    private static func openEncrypted(_ bus: BusConnection, _ service: String) throws(BusError) -> (path: String, key: KeyHolder?, algorithm: String) {
        let ours: DHKeyAgreement
        do throws(TransportError) { ours = try DHKeyAgreement() } catch { throw BusError.failed(error.message) }
        let publicKey = ours.publicKey
        var reply = try bus.call(destination: service, path: servicePath, interface: SecretService.serviceInterface,
                                 member: "OpenSession") { (writer: inout BusWriter) throws(BusError) in
            try writer.string(dhAlgorithm)
            try writer.open("v", "ay")
            let sent = publicKey.withUnsafeBytes { bytes in Result { () throws(BusError) in try writer.bytes(bytes) } }
            try sent.get()
            try writer.close()
        }
        try reply.enter("v", "ay")
        let theirs = try reply.bytes()
        try reply.exit()
        let path = try reply.objectPath()
        do throws(TransportError) {
            return (path, KeyHolder(try ours.sessionKey(peerPublicKey: theirs)), dhAlgorithm)
        } catch {
            throw BusError.failed("the service's Diffie-Hellman answer is unusable: \(error.message)")
        }
    }

    private static func openPlain(_ bus: BusConnection, _ service: String) throws(BusError) -> (path: String, key: KeyHolder?, algorithm: String) {
        var reply = try bus.call(destination: service, path: servicePath, interface: SecretService.serviceInterface,
                                 member: "OpenSession") { (writer: inout BusWriter) throws(BusError) in
            try writer.string("plain")
            try writer.open("v", "s")
            try writer.string("")
            try writer.close()
        }
        try reply.skip("v")
        return (try reply.objectPath(), nil, "plain")
    }

    deinit {
        _ = try? bus.call(destination: service, path: sessionPath, interface: SecretService.sessionInterface, member: "Close")
    }

    /// Every collection with its items' paths, unlocked first where locked (through the
    /// service's prompt, waiting at most `promptTimeout` for each). A collection the user
    /// declines to unlock is an error: a migration that skipped it would look complete.
    package func collections(promptTimeout: Duration) throws(BusError) -> [SourceCollection] {
        var reader = try property(Self.servicePath, SecretService.serviceInterface, "Collections", "ao")
        let paths = try Self.objectPaths(&reader)
        var locked: [String] = []
        for path in paths where try isLocked(path, SecretService.collectionInterface) { locked.append(path) }
        if !locked.isEmpty { try unlock(locked, SecretService.collectionInterface, timeout: promptTimeout) }
        var alias = try bus.call(destination: service, path: Self.servicePath, interface: SecretService.serviceInterface,
                                 member: "ReadAlias") { (writer: inout BusWriter) throws(BusError) in
            try writer.string("default")
        }
        let defaultCollection = try alias.objectPath()
        var collections: [SourceCollection] = []
        for path in paths {
            var itemList = try property(path, SecretService.collectionInterface, "Items", "ao")
            let items = try Self.objectPaths(&itemList)
            var label = try property(path, SecretService.collectionInterface, "Label", "s")
            collections.append(SourceCollection(path: path, label: try label.secretString(), items: items, isDefault: path == defaultCollection))
        }
        return collections
    }

    /// One item: label and attributes, and with `secret` its secret and content type (an item
    /// locked on its own, as KeePassXC and KWallet have them, unlocked through the prompt first).
    package func item(_ path: String, secret: Bool, promptTimeout: Duration) throws(BusError) -> SourceItem {
        try read(item: path, secret: secret, promptTimeout: promptTimeout)
    }

    private func read(item path: String, secret: Bool, promptTimeout: Duration) throws(BusError) -> SourceItem {
        var labelReader = try property(path, SecretService.itemInterface, "Label", "s")
        let label = try labelReader.secretString()
        var attributeReader = try property(path, SecretService.itemInterface, "Attributes", "a{ss}")
        let attributes = try Self.attributes(&attributeReader)
        guard secret else { return SourceItem(path: path, label: label, attributes: attributes, content: nil, contentType: nil) }
        // An item can be locked on its own (KeePassXC, KWallet): unlocked as a collection is.
        if try isLocked(path, SecretService.itemInterface) { try unlock([path], SecretService.itemInterface, timeout: promptTimeout) }
        var reply = try bus.call(destination: service, path: path, interface: SecretService.itemInterface,
                                 member: "GetSecret") { (writer: inout BusWriter) throws(BusError) in
            try writer.objectPath(sessionPath)
        }
        try reply.enter("r", "oayays")
        _ = try reply.objectPath()
        let parameters = try reply.bytes()
        let content: SecureBuffer
        if let key {
            // Ciphertext: nothing to wipe; the reply itself is wiped by sd-bus (sensitive).
            let ciphertext = try reply.bytes()
            do throws(TransportError) {
                content = try key.key.decrypt(iv: parameters, ciphertext: ciphertext)
            } catch {
                throw .failed("the secret of \(path) does not decrypt: \(error.message)")
            }
        } else {
            guard parameters.isEmpty else { throw .failed("a plain session's secret of \(path) came with parameters") }
            content = try reply.secretBytes()
        }
        let contentType = try reply.secretString()
        try reply.exit()
        return SourceItem(path: path, label: label, attributes: attributes, content: content, contentType: contentType)
    }

    private func isLocked(_ path: String, _ interface: String) throws(BusError) -> Bool {
        var reader = try property(path, interface, "Locked", "b")
        return try reader.bool()
    }

    /// Service.Unlock, then the prompt it may ask for: Prompt.Prompt and the Completed signal
    /// (the specification's flow). Dismissed, timed out, or still locked after: an error.
    private func unlock(_ paths: [String], _ interface: String, timeout: Duration) throws(BusError) {
        var reply = try bus.call(destination: service, path: Self.servicePath, interface: SecretService.serviceInterface,
                                 member: "Unlock") { (writer: inout BusWriter) throws(BusError) in
            try writer.open("a", "o")
            for path in paths { try writer.objectPath(path) }
            try writer.close()
        }
        _ = try Self.objectPaths(&reply)
        let prompt = try reply.objectPath()
        if prompt != "/" {
            let outcome = PromptOutcome()
            try bus.onSignal(sender: service, path: prompt, interface: SecretService.promptInterface,
                             member: "Completed") { (_, body: inout BusReader) throws(BusError) in
                outcome.dismissed = try body.bool()
            }
            _ = try bus.call(destination: service, path: prompt, interface: SecretService.promptInterface,
                             member: "Prompt") { (writer: inout BusWriter) throws(BusError) in
                try writer.string("")
            }
            guard try bus.process(until: { outcome.dismissed != nil }, timeout: timeout) else {
                _ = try? bus.call(destination: service, path: prompt, interface: SecretService.promptInterface, member: "Dismiss")
                throw .failed("the Secret Service's unlock prompt was not answered within \(timeout)")
            }
            if outcome.dismissed == true { throw .failed("the unlock prompt was dismissed: nothing was imported") }
        }
        for path in paths {
            if try isLocked(path, interface) { throw .failed("\(path) is still locked after its unlock prompt") }
        }
    }

    private final class PromptOutcome {
        var dismissed: Bool?
    }

    private func property(_ path: String, _ interface: String, _ name: String, _ signature: String) throws(BusError) -> BusReader {
        try bus.property(destination: service, path: path, interface: interface, name: name, signature: signature)
    }

    private static func objectPaths(_ reader: inout BusReader) throws(BusError) -> [String] {
        try reader.enter("a", "o")
        var paths: [String] = []
        while try reader.peek() != nil { paths.append(try reader.objectPath()) }
        try reader.exit()
        return paths
    }

    /// a{ss} into attributes: names and values never become Strings.
    private static func attributes(_ reader: inout BusReader) throws(BusError) -> [Attribute] {
        try reader.enter("a", "{ss}")
        var attributes: [Attribute] = []
        while try reader.peek() != nil {
            try reader.enter("e", "ss")
            let name = try reader.secretString()
            let value = try reader.secretString()
            try reader.exit()
            let attributeName: AttributeName
            do throws(VaultError) {
                attributeName = try name.withUnsafeBytes { (bytes) throws(VaultError) in try AttributeName(bytes: bytes) }
            } catch {
                throw .failed("an attribute name the vault cannot hold: \(error)")
            }
            attributes.append(Attribute(name: attributeName, value: value))
        }
        try reader.exit()
        return attributes
    }
}
