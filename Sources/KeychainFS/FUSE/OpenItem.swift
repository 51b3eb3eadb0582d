import VaultCore

/// The plaintext of an item that is open, shared by every descriptor on it (so reads through
/// one see writes through another, as with a page cache). Lives in locked memory; stored on
/// flush or fsync of a descriptor that wrote, in one transaction; wiped when the last closes.
final class OpenItem: @unchecked Sendable {  // only touched under FileSystem's mutex
    var node: Node
    var content: SecureBuffer
    /// Written since the last commit.
    var dirty = false
    /// The modification time to store (writes set it; utimens may set it back).
    var modified: Timestamp
    /// When the content last changed here (the ctime the commit records).
    var lastChange: Timestamp
    var handles = 0
    /// The item was unlinked or replaced while open: its content is kept for the open
    /// descriptors and never committed.
    var unlinked = false
    /// Locking wiped the plaintext; it is reloaded from the vault on the next use after unlock.
    var forgotten = false

    var id: NodeID { node.id }

    init(node: Node, content: consuming SecureBuffer) {
        self.node = node
        lastChange = node.attributes.changed
        modified = node.attributes.modified
        self.content = content
    }
}

/// An open file descriptor's state.
final class OpenFile: @unchecked Sendable {  // only touched under FileSystem's mutex
    let item: OpenItem
    let append: Bool
    /// This descriptor wrote (or truncated) since the item was last committed: its flush commits.
    var wrote = false
    /// A write through this descriptor went past the item limit: its next flush reports it.
    var rejected: VaultError?

    init(item: OpenItem, append: Bool) {
        self.item = item
        self.append = append
    }
}

/// A directory listing taken at opendir (and again on rewind), so readdir offsets stay stable.
struct DirectoryListing {
    struct Entry {
        let name: [UInt8]
        let inode: UInt64
        let isDictionary: Bool
    }
    let entries: [Entry]
}
