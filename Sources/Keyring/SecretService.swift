import Admission
import DBus
import Glibc
import Locking
import Synchronization
import VaultCore

/// The freedesktop Secret Service (`org.freedesktop.secrets`) over the vault: a collection is
/// a dictionary at the top of the vault, an item a file in it, the item's attributes its
/// vault attributes (the mount's `user.` extended attributes), its label and content type
/// item properties. Every call runs on the bus's loop thread (sd-bus is single-threaded), and
/// so does every table here; the one exception, a confirmation or an unlock prompt's
/// command, runs on a helper thread and posts its outcome back. One file per object as the
/// specification names them, each with the one declaration its dispatch, signature checks
/// and introspection come from (as oo7's server does): +Service, +Collection, +Item,
/// +Session, +Prompt; the property values collections and items share in +Properties, who
/// may do what in +Access, signals in +Changes.
final class SecretService: @unchecked Sendable {
    static let busName = "org.freedesktop.secrets"
    /// Object paths one call may name (GetSecrets, Unlock, Lock).
    static let objectLimit = 4096

    static let serviceInterface = "org.freedesktop.Secret.Service"
    static let collectionInterface = "org.freedesktop.Secret.Collection"
    static let itemInterface = "org.freedesktop.Secret.Item"
    static let sessionInterface = "org.freedesktop.Secret.Session"
    static let promptInterface = "org.freedesktop.Secret.Prompt"

    let bus: BusConnection
    let vault: Vault
    let locking: any LockControl
    let gate: AccessGate
    /// Run (`sh -c`) when a client completes an Unlock prompt; its output is the passphrase
    /// (the `--extpass` of the mount or service). Without it, prompts are dismissed.
    let unlockCommand: String?
    /// The mount's kernel caches, when the service runs beside a mount.
    let mountCache: (any MountCache)?

    // Loop thread only.
    var sessions = TransportSessions()
    var prompts = SecretPrompts()
    /// Each connection's process, and its start time: a pid outlives its process.
    var callers: [String: (context: RequestContext, startTime: UInt64?)] = [:]
    /// Whether the unlock command is running: one at a time, every waiting prompt shares it.
    var unlockRunning = false
    var model = CollectionModel()
    var lastSeenStamp: Vault.ChangeStamp?
    var lastSeenLocked = false
    /// Prompts waiting for the running unlock command; when none is left (dismissed, or their
    /// clients gone), the command's answer is thrown away. Read by the command's thread.
    let promptsWaitingForUnlock = OrderedMutex<Set<UInt64>>(.secretServicePrompts, [])

    init(bus: BusConnection, vault: Vault, locking: any LockControl, gate: AccessGate, unlockCommand: String?,
         mountCache: (any MountCache)?) {
        self.mountCache = mountCache
        self.bus = bus
        self.vault = vault
        self.locking = locking
        self.gate = gate
        self.unlockCommand = unlockCommand
    }

    /// Every method call to /org/freedesktop/secrets and below, dispatched by the declaration
    /// of the object its path names (one file each: +Service, +Collection, +Item, +Session,
    /// +Prompt).
    func handle(_ call: BusCall) {
        do throws(BusError) {
            guard let object = SecretObject(path: call.path) else { throw .unknownObject(call.path) }
            let caller = try identify(call.sender)
            // Using the keyring is using the vault (reading properties, which desktop programs
            // poll, is not): the mount's idle lock counts from here.
            if !BusStandardInterface.contains(call.interface) { locking.noteActivity() }
            let below = { [self] in children(of: object) }
            switch object {
            case .service:
                try SecretService.serviceObject.dispatch(call, children: below) { (self, caller) }
            case .directory:
                try BusObjectDeclaration<Void>.container.dispatch(call, children: below) {}
            case .collection, .alias:
                try SecretService.collectionObject.dispatch(call, children: below) { () throws(BusError) in
                    (self, try existingCollection(object), caller)
                }
            case .item(let collection, let item):
                try SecretService.itemObject.dispatch(call, children: below) { () throws(BusError) in
                    try existingItem(item, in: collection)
                    return (self, collection, item, caller)
                }
            case .session(let id):
                try SecretService.sessionObject.dispatch(call, children: below) { () throws(BusError) in
                    guard sessions.exists(id) else { throw .noSuchObject(call.path) }
                    return (self, id)
                }
            case .prompt(let id):
                try SecretService.promptObject.dispatch(call, children: below) { () throws(BusError) in
                    guard prompts[id] != nil else { throw .noSuchObject(call.path) }
                    return (self, id)
                }
            }
        } catch {
            call.replyError(error)
        }
    }

    /// A client left the bus: its sessions close and its prompts are dismissed (no one is
    /// left to hear their Completed).
    func peerVanished(_ name: String) {
        callers[name] = nil
        sessions.closeAll(ownedBy: name)
        let abandoned = prompts.dismissAll(ownedBy: name)
        promptsWaitingForUnlock.withLock { $0.subtract(abandoned) }
    }

    /// The collection an object path stands for (an alias resolves to its collection).
    func existingCollection(_ object: SecretObject) throws(BusError) -> NodeID {
        switch object {
        case .collection(let id):
            guard model.collections[id] != nil || (try? isCollection(id)) == true else { throw .noSuchObject(object.path) }
            return id
        case .alias(let name):
            guard let id = model.aliases[name] else { throw .noSuchObject(object.path) }
            return id
        default:
            throw .noSuchObject(object.path)
        }
    }

    /// A dictionary at the top of the vault.
    func isCollection(_ id: NodeID) throws(VaultError) -> Bool {
        let node = try vault.node(id)
        return node.kind == .dictionary && node.parent == .root && id != .root
    }

    func existingItem(_ item: NodeID, in collection: NodeID) throws(BusError) {
        if let known = model.collections[collection], known.items[item] != nil { return }
        guard let node = try? vault.node(item), node.kind == .item, node.parent == collection else {
            throw .noSuchObject(SecretObject.item(collection: collection, item: item).path)
        }
    }

    /// Object paths below `object`, for introspection.
    private func children(of object: SecretObject) -> [String] {
        switch object {
        case .service:
            return SecretObject.directories
        case .directory("collection"):
            return model.sortedCollections.map { String($0.rawValue) }
        case .directory("aliases"):
            return model.aliases.keys.sorted()
        case .collection(let id):
            return (model.collections[id]?.items.keys.map { String($0.rawValue) } ?? []).sorted()
        default:
            return []
        }
    }
}
