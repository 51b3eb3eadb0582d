import Admission
import DBus
import VaultCore

/// org.freedesktop.Secret.Item: a file directly in a collection's dictionary. Its declaration
/// (from which dispatch, the signature check and introspection come) and its methods.
extension SecretService {
    typealias ItemObject = (service: SecretService, collection: NodeID, item: NodeID, caller: RequestContext)

    static let itemObject = BusObjectDeclaration<ItemObject>(called: "an item", interfaces: [
        BusInterface(itemInterface, methods: [
            BusMethod("Delete", out: [("Prompt", "o")]) { (object, call) throws(BusError) in
                try object.service.deleteItem(call, object.item, in: object.collection, object.caller)
            },
            BusMethod("GetSecret", in: [("session", "o")], out: [("secret", "(oayays)")]) { (object, call) throws(BusError) in
                try object.service.getSecret(call, object.item, object.caller)
            },
            BusMethod("SetSecret", in: [("secret", "(oayays)")]) { (object, call) throws(BusError) in
                try object.service.setSecret(call, object.item, object.caller)
            },
        ], properties: [
            BusProperty("Locked", "b") { (object) throws(BusError) in
                let locked = object.service.isLocked(item: object.item)
                return { (writer) throws(BusError) in try writer.bool(locked) }
            },
            BusProperty("Attributes", "a{ss}", read: { (object) throws(BusError) in
                try object.service.attributesProperty(of: object.item, object.caller)
            }, write: { (object, reader) throws(BusError) in
                try object.service.setAttributes(of: object.item, from: &reader, object.caller)
            }),
            BusProperty("Label", "s", read: { (object) throws(BusError) in
                try object.service.labelProperty(of: object.item, object.caller)
            }, write: { (object, reader) throws(BusError) in
                try object.service.setLabel(of: object.item, from: &reader, object.caller)
            }),
            BusProperty("Type", "s", read: { (object) throws(BusError) in
                try object.service.typeProperty(of: object.item, object.caller)
            }, write: { (object, reader) throws(BusError) in
                try object.service.setType(of: object.item, from: &reader, object.caller)
            }),
            BusProperty("Created", "t") { (object) throws(BusError) in object.service.timeProperty(of: object.item) },
            BusProperty("Modified", "t") { (object) throws(BusError) in object.service.timeProperty(of: object.item) },
        ]),
    ])

    /// Delete() → o prompt, as unlink(2) through the mount would.
    private func deleteItem(_ call: BusCall, _ item: NodeID, in collection: NodeID, _ caller: RequestContext) throws(BusError) {
        try requireUnlocked()
        let name = try vaultCall { () throws(VaultError) in try vault.name(of: item) }
        guard let name else { throw .noSuchObject(call.path) }
        let checks: [AccessCheck] = [.write(UInt64(collection.rawValue), name), .write(UInt64(collection.rawValue))]
        authorize(call, checks, for: caller) { [self] () throws(BusError) in
            // Renamed while the user was asked: what now has the name is not this item.
            guard let current = try? vault.name(of: item), current == name else { throw .noSuchObject(call.path) }
            _ = try vaultCall { () throws(VaultError) in try vault.remove(named: name, in: collection, kind: .item) }
            mountCache?.dropEntry(name, in: collection)
            refreshModel()
            call.reply { (writer) throws(BusError) in try writer.objectPath(SecretObject.none) }
        }
    }

    /// GetSecret(o session) → (oayays).
    private func getSecret(_ call: BusCall, _ item: NodeID, _ caller: RequestContext) throws(BusError) {
        var reader = call.arguments()
        let session = try sessions.session(at: try reader.objectPath(), for: call.sender)
        if isLocked(item: item) { throw .isLocked("the item is locked; unlock the vault first") }
        authorize(call, [.reading(item: item)], for: caller) { [self] () throws(BusError) in
            let snapshot = try vaultCall { () throws(VaultError) in try vault.item(item) }
            call.reply { (writer) throws(BusError) in
                try session.write(snapshot.content, contentType: storedContentType(of: item), to: &writer)
            }
        }
    }

    /// SetSecret((oayays)): the content and its type, in one transaction.
    private func setSecret(_ call: BusCall, _ item: NodeID, _ caller: RequestContext) throws(BusError) {
        var reader = call.arguments()
        let secret = try sessions.readSecret(&reader, caller: call.sender)
        if isLocked(item: item) { throw .isLocked("the item is locked; unlock the vault first") }
        try vaultCall { () throws(VaultError) in try vault.checkItemSize(secret.content.count) }
        authorize(call, [.write(UInt64(item.rawValue))], for: caller) { [self] () throws(BusError) in
            try vaultCall { () throws(VaultError) in
                let attributes = try vault.attributes(of: item)
                let label = try vault.property(.label, of: item)
                _ = try vault.replaceItem(item, content: secret.content, attributes: attributes, label: label,
                                          contentType: secret.contentType)
            }
            mountCache?.dropNode(item)
            refreshModel()
            call.reply { _ in }
        }
    }

    /// An item's content type; nil when it has none, or while locked (an after-first-unlock
    /// item's secret is readable then, its sealed properties are not): text/plain then.
    func storedContentType(of item: NodeID) -> SecureBuffer? {
        do throws(VaultError) {
            return try vault.property(.contentType, of: item)
        } catch {
            return nil
        }
    }
}
