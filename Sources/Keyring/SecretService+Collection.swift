import Admission
import DBus
import VaultCore

/// org.freedesktop.Secret.Collection: a dictionary at the top of the vault. Its declaration
/// (from which dispatch, the signature check and introspection come) and its methods.
extension SecretService {
    typealias CollectionObject = (service: SecretService, collection: NodeID, caller: RequestContext)

    static let collectionObject = BusObjectDeclaration<CollectionObject>(called: "a collection", interfaces: [
        BusInterface(collectionInterface, methods: [
            BusMethod("Delete", out: [("prompt", "o")]) { (object, call) throws(BusError) in
                try object.service.deleteCollection(call, object.collection, object.caller)
            },
            BusMethod("SearchItems", in: [("attributes", "a{ss}")], out: [("results", "ao")]) { (object, call) throws(BusError) in
                try object.service.searchItems(call, in: object.collection, object.caller)
            },
            BusMethod("CreateItem", in: [("properties", "a{sv}"), ("secret", "(oayays)"), ("replace", "b")],
                      out: [("item", "o"), ("prompt", "o")]) { (object, call) throws(BusError) in
                try object.service.createItem(call, in: object.collection, object.caller)
            },
        ], properties: [
            BusProperty("Items", "ao") { (object) throws(BusError) in
                let paths = object.service.model.sortedItems(of: object.collection).map {
                    SecretObject.item(collection: object.collection, item: $0).path
                }
                return { (writer) throws(BusError) in try writer.objectPaths(paths) }
            },
            BusProperty("Label", "s", read: { (object) throws(BusError) in
                try object.service.labelProperty(of: object.collection, object.caller)
            }, write: { (object, reader) throws(BusError) in
                try object.service.setLabel(of: object.collection, from: &reader, object.caller)
            }),
            BusProperty("Locked", "b") { (object) throws(BusError) in
                let locked = object.service.locking.isLocked
                return { (writer) throws(BusError) in try writer.bool(locked) }
            },
            BusProperty("Created", "t") { (object) throws(BusError) in object.service.timeProperty(of: object.collection) },
            BusProperty("Modified", "t") { (object) throws(BusError) in object.service.timeProperty(of: object.collection) },
        ], signals: [
            BusSignal("ItemCreated", [("item", "o")]),
            BusSignal("ItemDeleted", [("item", "o")]),
            BusSignal("ItemChanged", [("item", "o")]),
        ]),
    ])

    /// Delete() → o prompt: the dictionary and every item in it, in one transaction, if the
    /// rules let the caller remove each of them, as `rm -r` through the mount would need.
    private func deleteCollection(_ call: BusCall, _ collection: NodeID, _ caller: RequestContext) throws(BusError) {
        try requireUnlocked()
        let (name, entries) = try vaultCall { () throws(VaultError) in (try vault.name(of: collection), try vault.entries(of: collection)) }
        guard let name else { throw .noSuchObject(call.path) }
        guard entries.allSatisfy({ $0.node.kind == .item }) else {
            throw .failed("this collection holds dictionaries: remove them through the mount or with keychainfs rm -r")
        }
        let root = UInt64(NodeID.root.rawValue), parent = UInt64(collection.rawValue)
        let checks: [AccessCheck] = [.list(parent), .write(root, name), .write(root), .write(parent)]
            + entries.map { .write(parent, $0.name) }
        authorize(call, checks, for: caller) { [self] () throws(BusError) in
            do throws(VaultError) {
                // By path, whose errors name it: they are replaced by the object's path.
                try vault.remove(try vault.path(of: collection), recursive: true)
                let table = try AliasTable.read(vault)
                let kept = table.filter { $0.value != collection }
                if kept.count != table.count { try AliasTable.write(kept, to: vault) }
            } catch .notFound {
                throw .noSuchObject(call.path)
            } catch {
                throw BusError(error).naming(call.path)
            }
            mountCache?.dropEntry(name, in: .root)
            refreshModel()
            call.reply { (writer) throws(BusError) in try writer.objectPath(SecretObject.none) }
        }
    }

    /// CreateItem(a{sv} properties, (oayays) secret, b replace) → (o item, o prompt). With
    /// replace, an item of the collection with exactly these attributes is replaced (content,
    /// attributes, label and type in one transaction); else a new file is named from the label.
    private func createItem(_ call: BusCall, in collection: NodeID, _ caller: RequestContext) throws(BusError) {
        var reader = call.arguments()
        let properties = try ItemProperties.read(&reader, interface: SecretService.itemInterface)
        let secret = try sessions.readSecret(&reader, caller: call.sender)
        let replace = try reader.bool()
        // The secret's own content type wins over a Type property.
        if let type = secret.contentType.take() { properties.contentType = .some(type) }
        try requireUnlocked()
        try vaultCall { () throws(VaultError) in try vault.checkItemSize(secret.content.count) }
        let attributes = properties.attributes ?? []
        let existing: NodeID? = replace ? try vaultCall { () throws(VaultError) -> NodeID? in
            // Only an item the caller may read is replaced: a refusal would tell it a match exists.
            for candidate in try vault.findItems(attributes, in: collection)
            where try vault.attributeNames(of: candidate).count == attributes.count
                && mayFind([.read(UInt64(candidate.rawValue))], for: caller) {
                return candidate
            }
            return nil
        } : nil
        let check: AccessCheck = existing.map { .write(UInt64($0.rawValue)) } ?? .write(UInt64(collection.rawValue))
        authorize(call, [check], for: caller) { [self] () throws(BusError) in
            let item = try vaultCall { () throws(VaultError) -> NodeID in
                if let existing {
                    defer { mountCache?.dropNode(existing) }
                    return try vault.replaceItem(existing, content: secret.content, attributes: attributes,
                                                 label: properties.label, contentType: properties.contentType).id
                }
                let name = try availableName(fromLabel: properties.label, in: collection)
                defer { mountCache?.dropEntry(name, in: collection) }
                return try vault.createItem(named: name, in: collection, content: secret.content, attributes: attributes,
                                            label: properties.label, contentType: properties.contentType).id
            }
            refreshModel()
            call.reply { (writer) throws(BusError) in
                try writer.objectPath(SecretObject.item(collection: collection, item: item).path)
                try writer.objectPath(SecretObject.none)
            }
        }
    }
}
