import Admission
import DBus
import VaultCore

/// org.freedesktop.DBus.Properties for every object: Get, GetAll, Set. A locked vault still
/// answers what is not secret (Locked, Items, Collections, times). Labels are sealed, so a
/// locked vault shows them empty (clients read Label to see that an object exists, and
/// would fail on an error); attributes and type of a locked item are IsLocked, and GetAll
/// leaves them out.
extension SecretService {
    private enum Property: String, CaseIterable {
        case collections = "Collections"
        case items = "Items"
        case label = "Label"
        case locked = "Locked"
        case created = "Created"
        case modified = "Modified"
        case attributes = "Attributes"
        case type = "Type"

        var signature: String {
            switch self {
            case .collections, .items: "ao"
            case .label, .type: "s"
            case .locked: "b"
            case .created, .modified: "t"
            case .attributes: "a{ss}"
            }
        }

        /// Secret or sealed with the vault's keys: unreadable while locked.
        var needsKeys: Bool { self == .label || self == .attributes || self == .type }
    }

    private func interface(of object: SecretObject) -> String? {
        switch object {
        case .service: SecretService.serviceInterface
        case .collection, .alias: SecretService.collectionInterface
        case .item: SecretService.itemInterface
        case .session: SecretService.sessionInterface
        case .prompt: SecretService.promptInterface
        case .directory: nil
        }
    }

    private func properties(of object: SecretObject) -> [Property] {
        switch object {
        case .service: [.collections]
        case .collection, .alias: [.items, .label, .locked, .created, .modified]
        case .item: [.locked, .attributes, .label, .type, .created, .modified]
        case .session, .prompt, .directory: []
        }
    }

    func properties(_ call: BusCall, _ object: SecretObject, _ caller: RequestContext) throws(BusError) {
        switch object {
        case .collection, .alias: _ = try existingCollection(object)
        case .item(let collection, let item): try existingItem(item, in: collection)
        case .session(let id): guard sessions.exists(id) else { throw .noSuchObject(call.path) }
        case .prompt(let id): guard prompts[id] != nil else { throw .noSuchObject(call.path) }
        case .service, .directory: break
        }
        var reader = call.arguments()
        switch call.member {
        case "Get":
            try expectSignature(call, "ss")
            let interface = try reader.string()
            let name = try reader.string()
            let property = try lookup(name, interface, object)
            try checkReadable(property, object, caller)
            call.reply { (writer) throws(BusError) in
                try writer.open("v", property.signature)
                try value(of: property, object, into: &writer)
                try writer.close()
            }
        case "GetAll":
            try expectSignature(call, "s")
            let interface = try reader.string()
            guard interface.isEmpty || interface == self.interface(of: object) else {
                return call.reply { (writer) throws(BusError) in try writer.open("a", "{sv}"); try writer.close() }
            }
            let readable = properties(of: object).filter { (try? checkReadable($0, object, caller)) != nil }
            call.reply { (writer) throws(BusError) in
                try writer.open("a", "{sv}")
                for property in readable {
                    try writer.open("e", "sv")
                    try writer.string(property.rawValue)
                    try writer.open("v", property.signature)
                    try value(of: property, object, into: &writer)
                    try writer.close()
                    try writer.close()
                }
                try writer.close()
            }
        case "Set":
            try expectSignature(call, "ssv")
            let interface = try reader.string()
            let name = try reader.string()
            let property = try lookup(name, interface, object)
            try set(property, object, from: &reader, call, caller)
        default:
            throw .unknownMethod("no method \(call.member) on org.freedesktop.DBus.Properties")
        }
    }

    private func lookup(_ name: String, _ interface: String, _ object: SecretObject) throws(BusError) -> Property {
        guard interface.isEmpty || interface == self.interface(of: object),
              let property = Property(rawValue: name), properties(of: object).contains(property) else {
            throw .unknownProperty("no property \(interface).\(name) on \(object.path)")
        }
        return property
    }

    /// Labels and attributes are what `getfattr` shows through the mount: the same rule
    /// (reading the node) governs them here.
    private func checkReadable(_ property: Property, _ object: SecretObject, _ caller: RequestContext) throws(BusError) {
        guard property.needsKeys else { return }
        if property == .label && locking.isLocked { return }
        try requireUnlocked()
        guard let node = node(of: object) else { return }
        switch gate.evaluate([.read(UInt64(node.rawValue))], caller) {
        case .allowed: return
        case .refused(let error): throw BusError(error)
        case .needsConfirmation:
            // Clients read properties in bulk (GetAll after every search): a dialog for each
            // would be noise, and answering unasked would bypass the rule. Refused; the secret
            // itself (GetSecret) is what asks.
            throw .accessDenied("a --confirm rule governs this object: its label and attributes are not shown over D-Bus (its secret is, once confirmed)")
        }
    }

    private func node(of object: SecretObject) -> NodeID? {
        switch object {
        case .collection(let id): id
        case .alias(let name): model.aliases[name]
        case .item(_, let item): item
        default: nil
        }
    }

    private func value(of property: Property, _ object: SecretObject, into writer: inout BusWriter) throws(BusError) {
        let node = node(of: object)
        switch property {
        case .collections:
            try writer.objectPaths(model.sortedCollections.map { SecretObject.collection($0).path })
        case .items:
            let collection = node ?? .root
            try writer.objectPaths(model.sortedItems(of: collection).map { SecretObject.item(collection: collection, item: $0).path })
        case .locked:
            if case .item(_, let item) = object { try writer.bool(isLocked(item: item)) } else { try writer.bool(locking.isLocked) }
        case .created, .modified:
            // Nodes keep no birth time: an item's creation is its last content change's
            // time when nothing later is known, as far as the vault can tell.
            let time = node.flatMap { try? vault.node($0).attributes.modified }
            try writer.uint64(UInt64(max(0, time?.seconds ?? 0)))
        case .label:
            guard let node, !locking.isLocked else { return try writer.string("") }
            // An item made through the mount or the CLI has no label of its own: its name is.
            let label = try vaultCall { () throws(VaultError) -> SecureBuffer in
                if let label = try vault.property(.label, of: node) { return label }
                if let name = try vault.name(of: node) { return try SecureBuffer.copy(of: name) }
                return try SecureBuffer(capacity: 0)
            }
            try writer.string(secret: label)
        case .type:
            guard let node else { return try writer.string("") }
            let type = try vaultCall { () throws(VaultError) in try vault.property(.contentType, of: node) }
            if let type { try writer.string(secret: type) } else { try writer.string("text/plain") }
        case .attributes:
            guard let node else { return try writer.open("a", "{ss}") }
            let attributes = try vaultCall { () throws(VaultError) in try vault.attributes(of: node) }
            try writer.open("a", "{ss}")
            // A value set through the mount may be any bytes; D-Bus strings are UTF-8 without
            // NUL. Such an attribute is left out rather than failing the whole reply.
            for attribute in attributes where attribute.value.withUnsafeBytes(BusWriter.isValidString) {
                try writer.open("e", "ss")
                let name = try vaultCall { () throws(VaultError) in try SecureBuffer.copy(of: attribute.name) }
                try writer.string(secret: name)
                try writer.string(secret: attribute.value)
                try writer.close()
            }
            try writer.close()
        }
    }

    /// Label (collections and items), Attributes and Type (items) are writable.
    private func set(_ property: Property, _ object: SecretObject, from reader: inout BusReader,
                     _ call: BusCall, _ caller: RequestContext) throws(BusError) {
        guard let node = node(of: object), property == .label || property == .attributes || property == .type else {
            throw .propertyReadOnly("\(property.rawValue) cannot be set")
        }
        try reader.enter("v", property.signature)
        let update = ItemProperties()
        switch property {
        case .attributes: update.attributes = try ItemProperties.readAttributes(&reader)
        case .type: update.contentType = try reader.secretString()
        default: update.label = try reader.secretString()
        }
        try reader.exit()
        try requireUnlocked()
        authorize(call, [.write(UInt64(node.rawValue))], for: caller) { [self] () throws(BusError) in
            try vaultCall { () throws(VaultError) in
                switch property {
                case .attributes: try vault.replaceAttributes(of: node, with: update.attributes ?? [])
                case .type: try vault.setProperty(.contentType, to: update.contentType, of: node)
                default: try vault.setProperty(.label, to: update.label, of: node)
                }
            }
            mountCache?.dropNode(node)
            refreshModel()
            call.reply { _ in }
        }
    }
}

extension BusWriter {
    /// Whether bytes can be sent as a D-Bus string: valid UTF-8 without NUL. Checked on the
    /// bytes, no String made of them (they may be secret).
    static func isValidString(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard !bytes.contains(0) else { return false }
        var decoder = UTF8()
        var iterator = bytes.makeIterator()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }
}
