import Glibc
import VaultCore

/// An open file descriptor: its own copy of the item's plaintext, in locked memory. A writer's
/// changes are private to its descriptor until its flush or fsync stores the whole content in
/// one transaction, so readers (and other writers) see the stored content, old or new, never a
/// mix, and each stored version is one writer's whole value. Wiped when the descriptor closes.
final class OpenFile: @unchecked Sendable {  // only touched under FileSystem's mutex
    /// The item's attributes as of open (and of this descriptor's own changes).
    var node: Node
    var content: SecureBuffer
    let append: Bool
    /// Written or truncated through this descriptor since it was last stored.
    var dirty = false
    /// The modification time to store (writes set it; utimens may set it back).
    var modified: Timestamp
    /// When the content last changed here (the ctime the commit records).
    var lastChange: Timestamp
    /// The item was unlinked or replaced while open: the content stays readable here and is
    /// never stored.
    var unlinked = false
    /// Locking wiped the plaintext; it is reloaded from the vault on the next use after unlock.
    var forgotten = false
    /// For a descriptor that only appends (O_APPEND, never truncated): where its own bytes
    /// begin. Its store appends them to whatever is stored by then, so two processes appending
    /// at once (`>>`) both keep their lines.
    var appendedFrom: Int?

    /// Why this descriptor can no longer be used (a write past the item limit, or pending
    /// writes a lock refused): reads, writes and flushes report it, and its close stores nothing.
    var refusal: VaultError?

    var id: NodeID { node.id }

    init(node: Node, content: consuming SecureBuffer, append: Bool) {
        self.node = node
        self.content = content
        self.append = append
        modified = node.attributes.modified
        lastChange = node.attributes.changed
    }
}

/// A directory listing taken at opendir (and again on rewind), so readdir offsets stay stable.
struct DirectoryListing {
    struct Entry {
        let name: [UInt8]
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
    /// Set when a lock wiped the entries (names are decrypted data): how many there were, so a
    /// read that continues after unlock can tell whether the same listing comes back.
    var wipedCount: Int? = nil
}
