import VaultCore

/// One open item: the plaintext every descriptor of the node reads and writes, in locked
/// memory, as tmpfs keeps one page cache per inode. What one descriptor writes the others see
/// at once; a close or fsync of a descriptor that wrote stores the blocks that changed in one
/// durable transaction (`ItemContent`). Wiped when its last descriptor closes, or by a lock.
/// Across mounts (other machines on a vault in PostgreSQL) there is one OpenItem per mount:
/// a store elsewhere reaches a clean one at once (FileSystem+RemoteChanges) but not one with
/// unstored writes, and two mounts' closes are two transactions, serialised by the server:
/// the last to commit wins the blocks it wrote and the size, the other's blocks stay. tmpfs,
/// with one page cache, would merge two descriptors' writes byte by byte.
final class OpenItem: @unchecked Sendable {  // only touched under FileSystem's mutex
    /// The item's attributes as last stored (or loaded), with chmod and utimens applied.
    var node: Node
    var content: ItemContent
    /// The content differs from what is stored.
    var dirty = false
    /// The modification time to store with the content (writes set it; utimens may set it back).
    var modified: Timestamp
    /// When the content last changed here (the ctime the store records).
    var lastChange: Timestamp
    /// The item was unlinked or replaced while open: the content stays readable through its
    /// descriptors and is never stored.
    var unlinked = false
    /// A lock wiped the plaintext; it is loaded again on the next use after unlock, if the
    /// stored item is still the version that was wiped.
    var forgotten = false
    /// The item changed while the vault was locked: these descriptors answer EIO, a new open
    /// gets a new OpenItem.
    var stale = false
    /// Descriptors sharing this content.
    var descriptors = 0

    var id: NodeID { node.id }

    /// After-first-unlock: a lock that kept the vault's keys for such items keeps its plaintext
    /// and its descriptors working.
    var isAfterFirstUnlock: Bool { node.attributes.accessibility == .afterFirstUnlock }

    /// Usable while the mount is locked.
    var servedWhileLocked: Bool { isAfterFirstUnlock && !forgotten }

    init(node: Node, content: ItemContent) {
        self.node = node
        self.content = content
        modified = node.attributes.modified
        lastChange = node.attributes.changed
    }

    /// The content was changed through a descriptor.
    func touched() {
        dirty = true
        modified = .now()
        lastChange = modified
    }

    /// Wipes the plaintext held.
    func wipeContent() {
        content.wipe()
    }

    /// A load found the item stored anew elsewhere and the content took it (it held no
    /// writes): its attributes come along, as a new reader would see them.
    func takeAdoptedVersion() {
        guard let node = content.adoptedNode else { return }
        content.clearAdopted()
        self.node = node
        modified = node.attributes.modified
        lastChange = node.attributes.changed
    }
}
