import VaultCore

/// The plaintext of an item that is open, shared by every handle on it (so reads through
/// one descriptor see writes through another, as on any filesystem). Lives in locked memory;
/// committed to the vault on flush, fsync and release; wiped when the last handle closes.
final class OpenItem: @unchecked Sendable {  // only touched under FileSystem's mutex
    let id: NodeID
    var content: SecureBuffer
    /// Written since the last commit.
    var dirty = false
    var modified: Timestamp
    var handles = 0
    /// The item was unlinked while open: its content is kept for the open handles and never committed.
    var unlinked = false
    /// A write went past the item limit: the pending changes are dropped at the next flush,
    /// which reports the error, so nothing of the oversized write is stored.
    var rejected: VaultError?
    /// Locking wiped the plaintext; it is reloaded from the vault on the next use after unlock.
    var forgotten = false

    init(node: Node, content: consuming SecureBuffer) {
        id = node.id
        modified = node.attributes.modified
        self.content = content
    }
}

/// An open file descriptor's state.
struct OpenFile {
    let item: OpenItem
    let append: Bool
    let writable: Bool
}

/// A directory listing taken at opendir, so readdir offsets stay stable.
struct DirectoryListing {
    struct Entry {
        let name: [UInt8]
        let inode: UInt64
        let isDictionary: Bool
    }
    let entries: [Entry]
}
