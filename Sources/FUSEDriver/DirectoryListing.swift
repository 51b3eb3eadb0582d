import Glibc
import VaultCore

/// A dictionary's entries as listed for one directory handle, so readdir offsets stay stable.
/// Names are decrypted data: they live in ItemNames, which wipe their bytes when released.
struct DirectoryListing {
    struct Entry {
        enum Name {
            case dot, dotDot
            case named(ItemName)

            func withCString<R>(_ body: (UnsafePointer<CChar>) -> R) -> R {
                switch self {
                case .dot: return ".".withCString(body)
                case .dotDot: return "..".withCString(body)
                case .named(let name): return name.withCString { chars, _ in body(chars) }
                }
            }
        }

        let name: Name
        /// The inode as listed (what a plain readdir reports).
        let inode: UInt64
        let isDictionary: Bool
        /// What a lookup of the name found when last checked; nil for `.` and `..`, which the
        /// kernel never looks up.
        var found: Found?
        /// The vault's change stamp when `found` was checked: while the vault's stamp is the
        /// same, it is still what a lookup would find.
        var checkedAt: Vault.ChangeStamp?

        /// What a directory entry itself tells: inode and type.
        var direntStat: stat {
            var st = stat()
            st.st_ino = ino_t(inode)
            st.st_mode = isDictionary ? S_IFDIR : S_IFREG
            return st
        }

        enum Found {
            case node(Node)
            case gone
            case unreadable
        }
    }

    var entries: [Entry]
    /// The vault's change stamp from just before the listing was taken.
    var stamp: Vault.ChangeStamp?
    /// Set when a lock wiped the entries: how many there were, so a read that continues after
    /// unlock can tell whether the same listing comes back.
    var wipedCount: Int? = nil

    /// What is left once a lock took the names.
    func wiped() -> DirectoryListing {
        DirectoryListing(entries: [], stamp: stamp, wipedCount: wipedCount ?? entries.count)
    }
}

/// The open directory handles, their listings, and the dictionaries they are open on: one
/// removed (rmdir, or replaced by a rename) while open still answers fstat through them, with
/// no link left, as on tmpfs, until its last handle closes.
struct DirectoryHandles {
    private var listings: [UInt64: DirectoryListing] = [:]
    private var dictionaries: [UInt64: Node] = [:]
    /// Dictionaries removed while a handle was open on them, by inode.
    private var removed: [UInt64: Node] = [:]

    mutating func open(_ handle: UInt64, on dictionary: Node) {
        listings[handle] = DirectoryListing(entries: [], stamp: nil)
        dictionaries[handle] = dictionary
    }

    func listing(_ handle: UInt64) -> DirectoryListing? { listings[handle] }

    mutating func set(_ listing: DirectoryListing, for handle: UInt64) { listings[handle] = listing }

    /// Taken out while it changes, so it is changed in place rather than copied.
    mutating func take(_ handle: UInt64) -> DirectoryListing? { listings.removeValue(forKey: handle) }

    mutating func close(_ handle: UInt64) {
        listings[handle] = nil
        guard let closed = dictionaries.removeValue(forKey: handle) else { return }
        if !dictionaries.values.contains(where: { $0.id == closed.id }) { removed[UInt64(closed.id.rawValue)] = nil }
    }

    /// `id` was removed at `time`: if a handle is open on it, it is kept for their fstat.
    mutating func noteRemoved(_ id: NodeID, at time: Timestamp) {
        guard var node = dictionaries.values.first(where: { $0.id == id }) else { return }
        node.attributes.changed = time
        removed[UInt64(id.rawValue)] = node
    }

    /// The dictionary as it was when removed, while a handle is still open on it.
    func removedDictionary(_ inode: UInt64) -> Node? { removed[inode] }

    /// A lock drops every name; the handles stay open.
    mutating func wipeNames() {
        listings = listings.mapValues { $0.wiped() }
    }

    mutating func removeAll() {
        listings.removeAll()
        dictionaries.removeAll()
        removed.removeAll()
    }
}
