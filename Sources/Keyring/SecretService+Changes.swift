import DBus
import Support
import VaultCore

/// Signals for every change, whichever door made it: the service's own calls, the mount and
/// the command line all commit to the vault, so one comparison of what the vault holds with
/// what it held (CollectionModel) finds them all. Called after each change made here, and
/// every quarter second by the loop, so a change through the mount or the CLI is announced
/// within a second.
extension SecretService {
    func tick() {
        if locking.isLocked != lastSeenLocked { noticeLockChange() }
        guard !locking.isLocked, let stamp = try? vault.changeStamp(), stamp != lastSeenStamp else { return }
        refreshModel()
    }

    /// Reads the vault's shape again and signals what changed since the last read.
    func refreshModel() {
        guard !locking.isLocked else { return }
        let stamp = try? vault.changeStamp()
        let now: CollectionModel
        do throws(VaultError) {
            now = try CollectionModel.read(vault)
        } catch {
            return  // locked meanwhile, or unreadable: the next tick tries again
        }
        lastSeenStamp = stamp
        let before = model
        model = now
        announceDifferences(from: before, to: now)
        if model.aliases["default"] == nil { makeDefaultCollection() }
    }

    /// A lock or unlock, by any door: collections report Locked at once.
    func noticeLockChange() {
        let locked = locking.isLocked
        guard locked != lastSeenLocked else { return }
        lastSeenLocked = locked
        for collection in model.sortedCollections {
            let path = SecretObject.collection(collection).path
            try? SecretService.collectionObject.emit("PropertiesChanged", from: path, on: bus) {
                (writer) throws(BusError) in
                try writer.string(SecretService.collectionInterface)
                try writer.open("a", "{sv}")
                try writer.open("e", "sv")
                try writer.string("Locked")
                try writer.open("v", "b")
                try writer.bool(locked)
                try writer.close()
                try writer.close()
                try writer.close()
                try writer.open("a", "s")
                try writer.close()
            }
            emit(SecretService.serviceObject, "CollectionChanged", on: SecretObject.service.path, about: path)
        }
        if !locked { refreshModel() }
    }

    private func announceDifferences(from before: CollectionModel, to now: CollectionModel) {
        let service = SecretObject.service.path
        for id in before.sortedCollections where now.collections[id] == nil {
            emit(SecretService.serviceObject, "CollectionDeleted", on: service, about: SecretObject.collection(id).path)
        }
        for id in now.sortedCollections {
            let path = SecretObject.collection(id).path
            guard let old = before.collections[id], let new = now.collections[id] else {
                emit(SecretService.serviceObject, "CollectionCreated", on: service, about: path)
                continue
            }
            var changed = old.changed != new.changed || old.modified != new.modified
            for item in old.items.keys.sorted(by: { $0.rawValue < $1.rawValue }) where new.items[item] == nil {
                emit(SecretService.collectionObject, "ItemDeleted", on: path, about: SecretObject.item(collection: id, item: item).path)
                changed = true
            }
            for item in now.sortedItems(of: id) {
                let itemPath = SecretObject.item(collection: id, item: item).path
                if old.items[item] == nil {
                    emit(SecretService.collectionObject, "ItemCreated", on: path, about: itemPath)
                    changed = true
                } else if old.items[item] != new.items[item] {
                    emit(SecretService.collectionObject, "ItemChanged", on: path, about: itemPath)
                    changed = true
                }
            }
            if changed { emit(SecretService.serviceObject, "CollectionChanged", on: service, about: path) }
        }
    }

    private func emit<Object>(_ declaration: BusObjectDeclaration<Object>, _ member: String, on path: String, about object: String) {
        try? declaration.emit(member, from: path, on: bus) { (writer) throws(BusError) in
            try writer.objectPath(object)
        }
    }

    /// The `default` alias exists from the start, as clients expect: on the dictionary
    /// `login` (gnome-keyring's name for it), made if missing.
    func makeDefaultCollection() {
        do throws(VaultError) {
            let login = try ItemName("login")
            let id: NodeID
            do throws(VaultError) {
                let existing = try vault.lookup(login, in: .root)
                guard existing.kind == .dictionary else { return }
                id = existing.id
            } catch .notFound {
                id = try vault.makeDictionary(named: login, in: .root).id
                mountCache?.dropEntry(login, in: .root)
            }
            var table = try AliasTable.read(vault)
            table["default"] = id
            try AliasTable.write(table, to: vault)
        } catch {
            DaemonLog.defaultCollectionFailed(error)
            return
        }
        refreshModel()
    }
}

extension SecretService {
    /// Before the loop runs (so on no other thread): what the vault holds now is the baseline
    /// changes are announced against.
    func start() {
        lastSeenLocked = locking.isLocked
        guard !lastSeenLocked else { return }
        lastSeenStamp = try? vault.changeStamp()
        if let now = try? CollectionModel.read(vault) { model = now }
        if model.aliases["default"] == nil { makeDefaultCollection() }
    }
}
