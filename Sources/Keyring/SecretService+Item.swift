import Admission
import DBus
import VaultCore

/// org.freedesktop.Secret.Item: a file directly in a collection's dictionary.
extension SecretService {
    func itemCall(_ call: BusCall, collection: NodeID, item: NodeID, _ caller: RequestContext) throws(BusError) {
        switch call.member {
        case "Delete": try deleteItem(call, item, in: collection, caller)
        case "GetSecret": try getSecret(call, item, caller)
        case "SetSecret": try setSecret(call, item, caller)
        default: throw .unknownMethod("no method \(call.member) on an item")
        }
    }

    /// Delete() → o prompt, as unlink(2) through the mount would.
    private func deleteItem(_ call: BusCall, _ item: NodeID, in collection: NodeID, _ caller: RequestContext) throws(BusError) {
        try expectSignature(call, "")
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
        try expectSignature(call, "o")
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
        try expectSignature(call, "(oayays)")
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
