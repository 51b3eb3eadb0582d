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

/// The open directory handles and their listings.
struct DirectoryHandles {
    private var listings: [UInt64: DirectoryListing] = [:]

    mutating func open(_ handle: UInt64) {
        listings[handle] = DirectoryListing(entries: [], stamp: nil)
    }

    func listing(_ handle: UInt64) -> DirectoryListing? { listings[handle] }

    mutating func set(_ listing: DirectoryListing, for handle: UInt64) { listings[handle] = listing }

    /// Taken out while it changes, so it is changed in place rather than copied.
    mutating func take(_ handle: UInt64) -> DirectoryListing? { listings.removeValue(forKey: handle) }

    mutating func close(_ handle: UInt64) { listings[handle] = nil }

    /// A lock drops every name; the handles stay open.
    mutating func wipeNames() {
        listings = listings.mapValues { $0.wiped() }
    }

    mutating func removeAll() { listings.removeAll() }
}
