import Admission
import DBus
import Support
import VaultCore

/// org.freedesktop.Secret.Service at /org/freedesktop/secrets: its declaration (from which
/// dispatch, the signature check and introspection come) and its methods.
extension SecretService {
    typealias ServiceObject = (service: SecretService, caller: RequestContext)

    static let serviceObject = BusObjectDeclaration<ServiceObject>(called: "the service", interfaces: [
        BusInterface(serviceInterface, methods: [
            BusMethod("OpenSession", in: [("algorithm", "s"), ("input", "v")], out: [("output", "v"), ("result", "o")]) {
                (object, call) throws(BusError) in try object.service.openSession(call)
            },
            BusMethod("CreateCollection", in: [("properties", "a{sv}"), ("alias", "s")], out: [("collection", "o"), ("prompt", "o")]) {
                (object, call) throws(BusError) in try object.service.createCollection(call, object.caller)
            },
            BusMethod("SearchItems", in: [("attributes", "a{ss}")], out: [("unlocked", "ao"), ("locked", "ao")]) {
                (object, call) throws(BusError) in try object.service.searchItems(call, in: nil, object.caller)
            },
            BusMethod("Unlock", in: [("objects", "ao")], out: [("unlocked", "ao"), ("prompt", "o")]) {
                (object, call) throws(BusError) in try object.service.unlock(call, object.caller)
            },
            BusMethod("Lock", in: [("objects", "ao")], out: [("locked", "ao"), ("Prompt", "o")]) {
                (object, call) throws(BusError) in try object.service.lock(call)
            },
            BusMethod("GetSecrets", in: [("items", "ao"), ("session", "o")], out: [("secrets", "a{o(oayays)}")]) {
                (object, call) throws(BusError) in try object.service.getSecrets(call, object.caller)
            },
            BusMethod("ReadAlias", in: [("name", "s")], out: [("collection", "o")]) {
                (object, call) throws(BusError) in try object.service.readAlias(call)
            },
            BusMethod("SetAlias", in: [("name", "s"), ("collection", "o")]) {
                (object, call) throws(BusError) in try object.service.setAlias(call, object.caller)
            },
        ], properties: [
            BusProperty("Collections", "ao") { (object) throws(BusError) in
                let paths = object.service.model.sortedCollections.map { SecretObject.collection($0).path }
                return { (writer) throws(BusError) in try writer.objectPaths(paths) }
            },
        ], signals: [
            BusSignal("CollectionCreated", [("collection", "o")]),
            BusSignal("CollectionDeleted", [("collection", "o")]),
            BusSignal("CollectionChanged", [("collection", "o")]),
        ]),
    ])

    /// CreateCollection(a{sv} properties, s alias) → (o collection, o prompt). Made at once,
    /// without a prompt; an alias already set returns its collection, as the spec says.
    private func createCollection(_ call: BusCall, _ caller: RequestContext) throws(BusError) {
        var reader = call.arguments()
        let properties = try ItemProperties.read(&reader, interface: SecretService.collectionInterface)
        let alias = try reader.string()
        guard alias.isEmpty || SecretObject.isValidAlias(alias) else {
            throw .invalidArgs("an alias is 1 to 64 of A-Z, a-z, 0-9 and _")
        }
        guard alias.isEmpty || model.aliases[alias] != nil || model.aliases.count < AliasTable.limit else {
            throw .limitsExceeded("at most \(AliasTable.limit) aliases")
        }
        if let existing = model.aliases[alias] {
            return call.reply { (writer) throws(BusError) in
                try writer.objectPath(SecretObject.collection(existing).path)
                try writer.objectPath(SecretObject.none)
            }
        }
        try requireUnlocked()
        authorize(call, [.write(UInt64(NodeID.root.rawValue))], for: caller) { [self] () throws(BusError) in
            let id = try vaultCall { () throws(VaultError) -> NodeID in
                let name = try availableName(fromLabel: properties.label, in: .root)
                let node = try vault.makeDictionary(named: name, in: .root)
                mountCache?.dropEntry(name, in: .root)
                if properties.label != nil { try vault.setProperty(.label, to: properties.label, of: node.id) }
                if !alias.isEmpty {
                    do throws(VaultError) {
                        var table = try AliasTable.read(vault)
                        table[alias] = node.id
                        try AliasTable.write(table, to: vault)
                    } catch {
                        // Not left half made: without its alias, a client would make another.
                        _ = try? vault.remove(named: name, in: .root, kind: .dictionary)
                        throw error
                    }
                }
                return node.id
            }
            refreshModel()
            call.reply { (writer) throws(BusError) in
                try writer.objectPath(SecretObject.collection(id).path)
                try writer.objectPath(SecretObject.none)
            }
        }
    }

    /// SearchItems(a{ss}) → (ao unlocked, ao locked); also Collection.SearchItems (→ ao).
    /// Items in a collection the caller may not list are left out. A locked vault cannot
    /// be searched (the attribute index is keyed): only items still readable while locked
    /// (after-first-unlock) are found then.
    func searchItems(_ call: BusCall, in collection: NodeID?, _ caller: RequestContext) throws(BusError) {
        var reader = call.arguments()
        let pairs = try ItemProperties.readAttributes(&reader)
        let found = try vaultCall { () throws(VaultError) in try itemsMatching(pairs, in: collection) }
        var unlocked: [String] = []
        var locked: [String] = []
        var listable: [NodeID: Bool] = [:]
        for item in found {
            guard let parent = model.collection(of: item) ?? (try? vault.node(item).parent),
                  model.collections[parent] != nil || (try? isCollection(parent)) == true else { continue }
            // A collection the caller may not list, or an item it may not read, is not found:
            // a match would tell it the attribute's value.
            let mayList = listable[parent] ?? mayFind([.list(UInt64(parent.rawValue))], for: caller)
            listable[parent] = mayList
            guard mayList, mayFind([.read(UInt64(item.rawValue))], for: caller) else { continue }
            let path = SecretObject.item(collection: parent, item: item).path
            if isLocked(item: item) { locked.append(path) } else { unlocked.append(path) }
        }
        call.reply { (writer) throws(BusError) in
            try writer.objectPaths(unlocked)
            if collection == nil { try writer.objectPaths(locked) }
        }
    }

    /// The items whose attributes include `pairs`. While locked, the search tags' key (kept
    /// at lock for this) still finds the candidates, so a client learns which items to unlock
    /// and asks for the prompt; an empty search is every item the service knows of.
    private func itemsMatching(_ pairs: [Attribute], in collection: NodeID?) throws(VaultError) -> [NodeID] {
        guard locking.isLocked else { return try vault.findItems(pairs, in: collection) }
        guard !pairs.isEmpty else {
            let collections = collection.map { [$0] } ?? model.sortedCollections
            return collections.flatMap { model.sortedItems(of: $0) }
        }
        do throws(VaultError) {
            return try vault.findLockedItems(pairs, in: collection)
        } catch .locked {
            return []  // started without the key (never unlocked): nothing to search with
        }
    }

    /// Unlock(ao) → (ao unlocked, o prompt): everything at once when the vault is unlocked,
    /// else a prompt that asks for the passphrase.
    private func unlock(_ call: BusCall, _ caller: RequestContext) throws(BusError) {
        var reader = call.arguments()
        let objects = try readObjectPaths(&reader)
        // Unlocking opens every door: a program the rules keep from the vault's top may not
        // ask for it (the --extpass command may not ask the user).
        if case .refused(let error) = gate.evaluate([.list(UInt64(NodeID.root.rawValue))], caller) { throw BusError(error) }
        guard locking.isLocked, !objects.isEmpty else {
            return call.reply { (writer) throws(BusError) in
                try writer.objectPaths(objects)
                try writer.objectPath(SecretObject.none)
            }
        }
        let prompt = try prompts.make(owner: call.sender, objects: objects)
        call.reply { (writer) throws(BusError) in
            try writer.objectPaths([])
            try writer.objectPath(SecretObject.prompt(prompt).path)
        }
    }

    /// Lock(ao) → (ao locked, o prompt): the whole vault locks, as `keychainfs lock` does.
    private func lock(_ call: BusCall) throws(BusError) {
        var reader = call.arguments()
        let objects = try readObjectPaths(&reader)
        // A lock tells the kernel to drop the mount's caches, which may wait on a request
        // the mount is still answering: not on the loop thread.
        let started = HelperThread.start { [self] in
            locking.lock()
            bus.post { [self] in
                noticeLockChange()
                call.reply { (writer) throws(BusError) in
                    try writer.objectPaths(objects)
                    try writer.objectPath(SecretObject.none)
                }
            }
        }
        if !started { throw .failed("cannot start a thread to lock on") }
    }

    /// GetSecrets(ao items, o session) → a{o(oayays)}: locked items, items that do not exist
    /// and items the rules keep from the caller are left out.
    private func getSecrets(_ call: BusCall, _ caller: RequestContext) throws(BusError) {
        var reader = call.arguments()
        let paths = try readObjectPaths(&reader)
        let session = try sessions.session(at: try reader.objectPath(), for: call.sender)
        var items: [(path: String, id: NodeID)] = []
        for path in paths {
            guard case .item(let collection, let item)? = SecretObject(path: path), (try? existingItem(item, in: collection)) != nil,
                  !isLocked(item: item) else { continue }
            items.append((path, item))
        }
        let groups = items.map { [AccessCheck.reading(item: $0.id)] }
        let readable = items
        authorize(groups, for: caller) { [self] outcomes in
            call.reply { (writer) throws(BusError) in
                try writer.open("a", "{o(oayays)}")
                for (index, item) in readable.enumerated() where outcomes[index] == nil {
                    guard let snapshot = try? vault.item(item.id) else { continue }
                    try writer.open("e", "o(oayays)")
                    try writer.objectPath(item.path)
                    try session.write(snapshot.content, contentType: storedContentType(of: item.id), to: &writer)
                    try writer.close()
                }
                try writer.close()
            }
        }
    }

    /// ReadAlias(s) → o, "/" when the alias is not set.
    private func readAlias(_ call: BusCall) throws(BusError) {
        var reader = call.arguments()
        let name = try reader.string()
        let path = model.aliases[name].map { SecretObject.collection($0).path } ?? SecretObject.none
        call.reply { (writer) throws(BusError) in try writer.objectPath(path) }
    }

    /// SetAlias(s name, o collection); "/" removes the alias.
    private func setAlias(_ call: BusCall, _ caller: RequestContext) throws(BusError) {
        var reader = call.arguments()
        let name = try reader.string()
        let path = try reader.objectPath()
        guard SecretObject.isValidAlias(name) else { throw .invalidArgs("an alias is 1 to 64 of A-Z, a-z, 0-9 and _") }
        guard model.aliases[name] != nil || model.aliases.count < AliasTable.limit else {
            throw .limitsExceeded("at most \(AliasTable.limit) aliases")
        }
        let target: NodeID? = path == SecretObject.none ? nil : try existingCollection(SecretObject(path: path) ?? .service)
        try requireUnlocked()
        authorize(call, [.write(UInt64(NodeID.root.rawValue))], for: caller) { [self] () throws(BusError) in
            try vaultCall { () throws(VaultError) in
                var table = try AliasTable.read(vault)
                table[name] = target
                try AliasTable.write(table, to: vault)
            }
            refreshModel()
            call.reply { _ in }
        }
    }

    /// A readable, unused name made from a label (an empty one without a label).
    func availableName(fromLabel label: borrowing SecureBuffer?, in parent: NodeID) throws(VaultError) -> ItemName {
        switch label {
        case .some(let label): return try vault.availableItemName(fromLabel: label, in: parent)
        case .none: return try vault.availableItemName(fromLabel: try SecureBuffer(capacity: 0), in: parent)
        }
    }

    /// At most `objectLimit`: what a call names is kept (a prompt's objects) or walked.
    func readObjectPaths(_ reader: inout BusReader) throws(BusError) -> [String] {
        var paths: [String] = []
        try reader.enter("a", "o")
        while !reader.atEnd {
            guard paths.count < SecretService.objectLimit else { throw .limitsExceeded("at most \(SecretService.objectLimit) objects in one call") }
            paths.append(try reader.objectPath())
        }
        try reader.exit()
        return paths
    }

    /// Whether an item's secret is out of reach: the vault is locked and the item is not one
    /// a lock leaves readable (after-first-unlock).
    func isLocked(item: NodeID) -> Bool {
        guard locking.isLocked else { return false }
        guard vault.keepsAfterFirstUnlockKeys, let node = try? vault.node(item) else { return true }
        return node.attributes.accessibility != .afterFirstUnlock
    }

    func requireUnlocked() throws(BusError) {
        if locking.isLocked { throw .isLocked("the vault is locked; unlock it first (Unlock, or keychainfs unlock)") }
    }

    /// Runs a vault operation, its error mapped once (BusError.init(VaultError)).
    func vaultCall<R: ~Copyable>(_ body: () throws(VaultError) -> R) throws(BusError) -> R {
        do throws(VaultError) {
            return try body()
        } catch {
            throw BusError(error)
        }
    }
}

extension BusWriter {
    mutating func objectPaths(_ paths: [String]) throws(BusError) {
        try open("a", "o")
        for path in paths { try objectPath(path) }
        try close()
    }

    /// `ay` from bytes that are not secret (a public key, an IV, a ciphertext).
    mutating func bytes(_ array: [UInt8]) throws(BusError) {
        var failure: BusError?
        array.withUnsafeBytes { buffer in
            do throws(BusError) { try bytes(buffer) } catch { failure = error }
        }
        if let failure { throw failure }
    }
}

extension SecureBuffer {
    /// A name's bytes in locked memory, for a reply (names are secrets too).
    static func copy(of name: AttributeName) throws(VaultError) -> SecureBuffer {
        try copy(count: name.count) { name.withUnsafeBytes($0) }
    }

    static func copy(of name: ItemName) throws(VaultError) -> SecureBuffer {
        try copy(count: name.count) { name.withUnsafeBytes($0) }
    }

    private static func copy(count: Int, _ bytes: ((UnsafeRawBufferPointer) -> Void) -> Void) throws(VaultError) -> SecureBuffer {
        var copy = try SecureBuffer(capacity: count)
        copy.withUnsafeMutableStorage { storage in
            bytes { storage.copyMemory(from: $0) }
            return count
        }
        return copy
    }
}

extension AccessCheck {
    /// Reading an item's secret: recorded in the access log like an open through the mount.
    static func reading(item: NodeID) -> AccessCheck {
        var check = AccessCheck.read(UInt64(item.rawValue))
        check.isAlwaysRecorded = true
        return check
    }
}
