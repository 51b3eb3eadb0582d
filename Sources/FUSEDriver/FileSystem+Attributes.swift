import Admission
import Glibc
import VaultCore

/// getattr, setattr, access: what `stat` shows and what chmod, utimens and truncate change.
extension FileSystem {
    /// A node as `stat` shows it; an open item's shared content gives the size and times a
    /// writer has reached, as the kernel must see them from stat, lookup and listing alike (a
    /// stored size shorter than what a writer already wrote would move its end of file back).
    func stat(of node: Node, open item: OpenItem? = nil) -> stat {
        var st = Glibc.stat()
        st.st_ino = ino_t(node.id.rawValue)
        var attributes = node.attributes
        var size = attributes.size
        var linked = true
        if let item, !item.forgotten {
            attributes = item.node.attributes
            size = item.content.count
            // A write, ftruncate or fallocate through any descriptor moves both at once, as on
            // tmpfs, not when a close stores them.
            attributes.modified = item.modified
            attributes.changed = item.lastChange
            linked = !item.unlinked
        }
        let permissions = mode_t(attributes.mode & 0o7777)
        switch node.kind {
        case .dictionary:
            st.st_mode = S_IFDIR | permissions
            // `.`, its entry in its parent, and each sub-dictionary's `..`.
            st.st_nlink = nlink_t(2 + attributes.subdictionaries)
            st.st_size = 4096
        case .item:
            st.st_mode = S_IFREG | permissions
            // An open file that was unlinked has no name left, as fstat reports on any filesystem.
            st.st_nlink = linked ? 1 : 0
            st.st_size = off_t(size)
        }
        st.st_uid = ownerUID
        st.st_gid = ownerGID
        st.st_blksize = 4096
        st.st_blocks = blkcnt_t((st.st_size + 511) / 512)
        st.st_mtim = timespec(tv_sec: Int(attributes.modified.seconds), tv_nsec: Int(attributes.modified.nanoseconds))
        st.st_atim = timespec(tv_sec: Int(attributes.accessed.seconds), tv_nsec: Int(attributes.accessed.nanoseconds))
        st.st_ctim = timespec(tv_sec: Int(attributes.changed.seconds), tv_nsec: Int(attributes.changed.nanoseconds))
        return st
    }

    /// getattr.
    func attributes(_ inode: UInt64, handle: UInt64?, _ caller: RequestContext) throws(VaultError) -> Glibc.stat {
        try state.withLock { (state) throws(VaultError) in
            let id = NodeID(Int64(inode))
            if state.lock.locked && id == .root { return lockedRootStat() }
            return try currentStat(id, through: descriptor(handle, of: id, state), state)
        }
    }

    /// The open descriptor `handle` names, if it is one of node `id`.
    func descriptor(_ handle: UInt64?, of id: NodeID, _ state: borrowing State) -> OpenFile? {
        handle.flatMap { state.openItems.file($0) }.flatMap { $0.id == id ? $0 : nil }
    }

    /// Through a descriptor (fstat) its item's view, else what a stat by path shows; a node
    /// removed while open still answers through its descriptors.
    func currentStat(_ id: NodeID, through file: OpenFile?, _ state: borrowing State) throws(VaultError) -> Glibc.stat {
        if let file, file.item.unlinked || file.item.stale { return stat(of: file.item.node, open: file.item) }
        do throws(VaultError) {
            return pathStat(of: try vault.node(id), state)
        } catch .notFound {
            if let removed = state.directories.removedDictionary(UInt64(id.rawValue)) {
                var st = stat(of: removed)
                st.st_nlink = 0
                return st
            }
            // Removed behind the mount's back (the command line): its open descriptors keep it.
            guard let item = file?.item ?? state.openItems.item(id) else { throw .notFound("node \(id)") }
            item.unlinked = true
            return stat(of: item.node, open: item)
        }
    }

    /// What a stat by path, a lookup and a listing all show.
    func pathStat(of node: Node, _ state: borrowing State) -> Glibc.stat {
        stat(of: node, open: state.openItems.item(node.id))
    }

    /// While locked the mountpoint itself stays visible (so `ls -ld` and shells cope);
    /// everything below it answers EACCES.
    private func lockedRootStat() -> Glibc.stat {
        var st = Glibc.stat()
        st.st_ino = ino_t(NodeID.root.rawValue)
        st.st_mode = S_IFDIR | 0o700
        st.st_nlink = 2
        st.st_uid = ownerUID
        st.st_gid = ownerGID
        st.st_size = 4096
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        st.st_mtim = now
        st.st_ctim = now
        st.st_atim = now
        return st
    }

    /// chmod, utimens, truncate / ftruncate, chown (accepted, not stored: the mounting user owns
    /// everything). ftruncate changes the shared content, stored at the descriptor's close; a
    /// truncate by path is stored at once.
    func setAttributes(_ inode: UInt64, handle: UInt64?, mode: mode_t?, size: Int?, modified: Timestamp?,
                       accessed: Timestamp?, _ caller: RequestContext) throws(VaultError) -> Glibc.stat {
        try state.withLock { (state) throws(VaultError) in
            let id = NodeID(Int64(inode))
            // Nothing below may touch a wiped buffer: a resize of it would be stored later. Only
            // a truncate of an after-first-unlock item goes on while locked (its plaintext was
            // kept; the vault refuses any other item).
            if state.lock.locked {
                let truncateOnly = size != nil && mode == nil && modified == nil && accessed == nil
                guard truncateOnly, try vault.node(id).attributes.accessibility == .afterFirstUnlock else { throw .locked }
            }
            let file = descriptor(handle, of: id, state)
            if let size {
                if let file {
                    try checkUsable(file)
                    try recall(file.item)
                    try resize(file.item, to: size)
                    file.wrote = true
                } else if let item = state.openItems.item(id) {
                    try recall(item)
                    try resize(item, to: size)
                    do throws(VaultError) {
                        try store(item, state)
                    } catch {
                        // The open content is truncated already: its descriptors' closes try
                        // the store again rather than drop the truncation unseen.
                        for open in state.openItems.descriptors(of: item) { open.wrote = true }
                        throw error
                    }
                } else {
                    _ = try vault.truncateItem(id, to: size)
                }
            }
            if mode != nil || modified != nil || accessed != nil {
                // chmod and utimens reach no descriptor (the kernel sends no handle): the open
                // item takes them too, so a later store keeps them.
                let item = file?.item ?? state.openItems.item(id)
                do throws(VaultError) {
                    let node = try vault.setAttributes(of: id, mode: mode.map { UInt32($0) & 0o7777 }, modified: modified,
                                                       accessed: accessed, durable: flusher == nil)
                    flusher?.changed()
                    if let item {
                        // Mode and times only: the item's content version stays the one its
                        // plaintext is, whatever another process stored meanwhile.
                        item.node.attributes.mode = node.attributes.mode
                        item.node.attributes.changed = node.attributes.changed
                        item.node.attributes.accessed = node.attributes.accessed
                        // A later store must not set the change time back to an earlier write's.
                        item.lastChange = node.attributes.changed
                        if let modified { item.modified = modified }
                    }
                } catch .notFound where item != nil {
                    item!.unlinked = true
                    item!.lastChange = .now()
                    if let mode { item!.node.attributes.mode = UInt32(mode) & 0o7777 }
                    if let modified { item!.modified = modified }
                    if let accessed { item!.node.attributes.accessed = accessed }
                }
            }
            return try currentStat(id, through: file, state)
        }
    }

    /// access(2) against the stored mode, for callers that ask before acting.
    func access(_ inode: UInt64, mask: Int32, _ caller: RequestContext) throws(VaultError) -> Bool {
        let node = try vault.node(NodeID(Int64(inode)))
        if mask == F_OK || caller.uid == 0 { return mask & X_OK == 0 || node.kind == .dictionary || node.attributes.mode & 0o111 != 0 }
        let owner = (node.attributes.mode >> 6) & 7
        return UInt32(mask) & ~owner == 0
    }
}
