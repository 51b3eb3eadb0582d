import Glibc
import VaultCore

/// An open file descriptor: a view of its node's shared OpenItem, with what is its own: the
/// append flag, whether it wrote since the content was last stored (its close is then a
/// store), and why it may no longer be used.
final class OpenFile: @unchecked Sendable {  // only touched under FileSystem's mutex
    let item: OpenItem
    let append: Bool
    /// Wrote or truncated since the item's content was last stored: its close or fsync stores.
    var wrote = false
    /// Why this descriptor can no longer be used (its unfinished writes were refused by a
    /// lock): reads, writes and flushes report it, and its close stores nothing.
    var refusal: VaultError?

    /// The process that opened it (the thread's id FUSE gave): a `--confirm` rule's answer
    /// covers its reads and writes, and nobody else's.
    let opener: pid_t

    var id: NodeID { item.id }

    init(item: OpenItem, append: Bool, opener: pid_t) {
        self.item = item
        self.append = append
        self.opener = opener
    }
}
