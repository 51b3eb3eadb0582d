import Admission
import Glibc
import VaultCore

/// open, create, read, write, fallocate, flush, fsync, release. Every descriptor of a node
/// shares the node's OpenItem, so what one writes the others read at once, as on tmpfs.
extension FileSystem {
    /// open(2): shares the node's open item, or loads the stored content into a new one.
    /// O_TRUNC empties the shared content; that descriptor's close stores it.
    func open(_ inode: UInt64, flags: Int32, _ caller: RequestContext) throws(VaultError) -> UInt64 {
        // A vault served from its offline replica takes no change: refused at the open, as a
        // read-only filesystem does, not at a close whose writes would then be lost.
        if flags & O_ACCMODE != O_RDONLY || flags & O_TRUNC != 0 { try vault.refuseChangesWhileNotLive() }
        return try state.withLock { (state) throws(VaultError) in
            let item = try openItem(NodeID(Int64(inode)), &state)
            let file = OpenFile(item: item, append: flags & O_APPEND != 0, opener: caller.pid)
            if flags & O_TRUNC != 0 {
                try resize(item, to: 0)
                file.wrote = true
            }
            let handle = state.newHandle()
            state.openItems.add(file, handle: handle)
            return handle
        }
    }

    /// The node's open item, brought up to date with the vault: content stored meanwhile by
    /// another process (the command line) replaces a clean shared content, as a new reader on
    /// any filesystem sees the last write.
    /// While locked, the vault itself refuses every item but after-first-unlock ones.
    private func openItem(_ id: NodeID, _ state: inout State) throws(VaultError) -> OpenItem {
        if state.lock.locked, let item = state.openItems.item(id), !item.servedWhileLocked { throw .locked }
        if let item = state.openItems.item(id) {
            do throws(VaultError) {
                try recall(item)
            } catch .integrityFailure {
                // Changed while the vault was locked: the descriptors on it answer EIO, this
                // open gets the item as it is now.
                state.openItems.retire(item)
                let opened = try vault.openItem(id)
                return OpenItem(node: opened.node, content: opened.content)
            }
            try catchUp(item)
            return item
        }
        let opened = try vault.openItem(id)
        return OpenItem(node: opened.node, content: opened.content)
    }

    func create(_ parent: UInt64, _ name: ItemName, mode: mode_t, flags: Int32,
                _ caller: RequestContext) throws(VaultError) -> (Glibc.stat, UInt64) {
        try state.withLock { (state) throws(VaultError) in
            guard !state.lock.locked else { throw .locked }
            // New items are private: group and other bits are dropped; the owner's bits and
            // setuid, setgid and sticky stay, as chmod keeps them. The row's commit skips its
            // fsync. With a flusher the new empty item is a namespace change like mkdir, durable
            // within the window, and a close stores only what was written through it: `echo >`
            // closes the new file once before writing (open, dup2, close), and that close need
            // not be a second durable commit. Without one (`--sync`) the close stores it durably.
            let node = try vault.createItem(named: name, in: NodeID(Int64(parent)), content: try SecureBuffer(capacity: 0),
                                            mode: UInt32(mode) & 0o7700, durable: false)
            flusher?.changed()
            let item = OpenItem(node: node, content: .empty(of: node))
            item.dirty = flusher == nil
            let file = OpenFile(item: item, append: flags & O_APPEND != 0, opener: caller.pid)
            file.wrote = flusher == nil
            let handle = state.newHandle()
            state.openItems.add(file, handle: handle)
            state.lookups.add(UInt64(node.id.rawValue))
            return (stat(of: node, open: item), handle)
        }
    }

    /// Throws unless the access rules admit `caller` to `check` (a read or write) through the
    /// descriptor `handle`, as `AccessGate.admitUse` judges. The kernel's own requests (pid 0)
    /// pass: no program stands behind them.
    func admitUse(_ handle: UInt64, _ check: AccessCheck, _ caller: RequestContext) throws(VaultError) {
        guard caller.pid != 0, let opener = state.withLock({ $0.openItems.file(handle)?.opener }) else { return }
        if let refusal = gate.admitUse(check, caller, opener: opener) { throw refusal }
    }

    /// Hands the requested range of plaintext to `reply` from locked memory, loading the
    /// blocks it needs.
    func read(_ handle: UInt64, offset: Int, size: Int, _ caller: RequestContext,
              reply: (UnsafeRawBufferPointer) -> Void) throws(VaultError) {
        try state.withLock { (state) throws(VaultError) in
            let file = try usableFile(handle, state)
            try recall(file.item)
            defer { file.item.takeAdoptedVersion() }
            try file.item.content.read(from: vault, offset: offset, size: size, scratch: scratch, reply: reply)
        }
    }

    /// Copies written bytes into the shared content; nothing reaches the vault until a flush.
    /// A write past the vault's item limit fails alone with EFBIG, as a write past
    /// RLIMIT_FSIZE does: the descriptor stays usable and the item keeps what it held.
    func write(_ handle: UInt64, _ bytes: UnsafeRawBufferPointer, offset: Int, _ caller: RequestContext) throws(VaultError) -> Int {
        try state.withLock { (state) throws(VaultError) in
            let file = try usableFile(handle, state)
            let item = file.item
            try recall(item)
            let start = file.append ? item.content.count : offset
            // What fits below the limit is written and the write is short, as with RLIMIT_FSIZE
            // (the kernel sends one write(2) in parts; the part that crosses the limit is cut
            // there); only a write that starts at the limit fails.
            let fitting = min(bytes.count, max(vault.itemSizeLimit - start, 0))
            guard fitting > 0 || bytes.isEmpty else { throw .itemTooLarge(size: start + 1, limit: vault.itemSizeLimit) }
            defer { item.takeAdoptedVersion() }
            try item.content.write(from: vault, UnsafeRawBufferPointer(rebasing: bytes[..<fitting]), at: start)
            item.touched()
            file.wrote = true
            return fitting
        }
    }

    /// fallocate: makes room up to offset + length (zeros, stored at close), within the item
    /// limit; with `keepSize` (FALLOC_FL_KEEP_SIZE) there is nothing to reserve in a vault.
    func allocate(_ handle: UInt64, keepSize: Bool, offset: Int, length: Int, _ caller: RequestContext) throws(VaultError) {
        guard offset >= 0, length > 0 else { throw .invalidArgument("fallocate range") }
        try state.withLock { (state) throws(VaultError) in
            let file = try usableFile(handle, state)
            // KEEP_SIZE reserves room the vault never needs, within the limit or past it.
            guard !keepSize else { return }
            let (end, overflow) = offset.addingReportingOverflow(length)
            guard !overflow else { throw .itemTooLarge(size: Int.max, limit: vault.itemSizeLimit) }
            try vault.checkItemSize(end)
            // The size to compare with is the stored one, not a buffer a lock wiped.
            try recall(file.item)
            guard end > file.item.content.count else { return }
            try resize(file.item, to: end)
            file.wrote = true
        }
    }

    /// flush (every close): a descriptor that wrote stores the item's current content in one
    /// transaction; `durable` false leaves its sync to the caller, which answers once
    /// everything committed is durable (`GroupCommit`). Whether it stored anything.
    func flush(_ handle: UInt64, _ caller: RequestContext, durable: Bool = true) throws(VaultError) -> Bool {
        try state.withLock { (state) throws(VaultError) -> Bool in
            guard let file = state.openItems.file(handle) else { return false }
            guard file.wrote || file.refusal != nil || file.item.stale else { return false }
            try checkUsable(file)
            return try store(file.item, state, durable: durable)
        }
    }

    /// fsync: the file's whole current content is made durable, whichever descriptor wrote it,
    /// as fsync on any descriptor of a file does, and so is every namespace change before it
    /// (the rename that put it in place, say), as on a journaling filesystem. `durable` false
    /// leaves that sync to the caller (`GroupCommit`).
    func sync(_ handle: UInt64, _ caller: RequestContext, durable: Bool = true) throws(VaultError) {
        try state.withLock { (state) throws(VaultError) in
            guard let file = state.openItems.file(handle) else { return }
            try checkUsable(file)
            try store(file.item, state, durable: durable)
        }
        if durable { try flusher?.syncNow() }
    }

    /// The last close of a descriptor: stores what it left unstored (a flush normally came
    /// first); the item's plaintext is wiped with its last descriptor.
    func release(_ handle: UInt64, _ caller: RequestContext) throws(VaultError) {
        var closed: UInt64? = nil
        // Whatever a private mmap through this descriptor pulled into the page cache goes.
        defer { if let closed { pageCache.drop(closed) } }
        try state.withLock { (state) throws(VaultError) in
            guard let file = state.openItems.file(handle) else { return }
            closed = UInt64(file.id.rawValue)
            defer { _ = state.openItems.remove(handle) }
            if file.refusal == nil && file.wrote { try store(file.item, state) }
        }
    }

    // MARK: steps shared by the operations above

    private func usableFile(_ handle: UInt64, _ state: borrowing State) throws(VaultError) -> OpenFile {
        guard let file = state.openItems.file(handle) else {
            if state.lock.locked { throw .locked }
            throw .invalidArgument("bad file handle")
        }
        guard !state.lock.locked || file.item.servedWhileLocked else { throw .locked }
        try checkUsable(file)
        return file
    }

    func checkUsable(_ file: OpenFile) throws(VaultError) {
        if let refusal = file.refusal { throw refusal }
        if file.item.stale { throw .integrityFailure("the item changed while the vault was locked; reopen it") }
    }

    /// Reloads content that a lock wiped, now that the vault is unlocked again, provided the
    /// item did not change meanwhile (a descriptor never reads two versions across a lock).
    func recall(_ item: OpenItem) throws(VaultError) {
        guard item.forgotten else { return }
        guard !item.unlinked else { throw .integrityFailure("an unlinked file's content was wiped by locking") }
        let opened: Vault.OpenedItem
        do throws(VaultError) {
            opened = try vault.openItem(item.id)
        } catch .notFound {
            // Removed while locked: read(2) knows no ENOENT; the content is gone for good.
            item.unlinked = true
            throw .integrityFailure("the item was removed while the vault was locked")
        }
        guard opened.node.attributes.contentVersion == item.node.attributes.contentVersion else {
            throw .integrityFailure("the item changed while the vault was locked; reopen it")
        }
        item.content = opened.content
        item.forgotten = false
    }

    /// A clean shared content replaced by the stored one when that moved on (stored by the
    /// command line or another machine meanwhile), as every descriptor of a tmpfs file sees the
    /// last write. Unstored writes here are kept: this mount's close decides then.
    func catchUp(_ item: OpenItem) throws(VaultError) {
        guard !item.dirty && !item.unlinked && !item.forgotten && !item.stale else { return }
        let stored = try vault.node(item.id)
        guard stored.attributes.contentVersion != item.node.attributes.contentVersion else { return }
        let opened = try vault.openItem(item.id)
        item.node = opened.node
        item.modified = opened.node.attributes.modified
        item.lastChange = opened.node.attributes.changed
        item.content = opened.content
    }

    func resize(_ item: OpenItem, to size: Int) throws(VaultError) {
        try vault.checkItemSize(size)
        defer { item.takeAdoptedVersion() }
        try item.content.resize(from: vault, to: size)
        item.touched()
    }

    /// Stores what changed in the item's content in one transaction, durable unless `durable` is false (the
    /// caller syncs then); on failure it stays dirty and the vault keeps the previous content.
    /// Every descriptor's writes so far go with it. Whether it stored anything.
    @discardableResult
    func store(_ item: OpenItem, _ state: borrowing State, durable: Bool = true) throws(VaultError) -> Bool {
        guard item.dirty, !item.unlinked, !item.stale else { return false }
        do throws(VaultError) {
            item.node = try vault.storeContent(item.content, modified: item.modified, changed: item.lastChange, durable: durable)
            item.dirty = false
            for other in state.openItems.descriptors(of: item) { other.wrote = false }
            return true
        } catch .notFound {
            item.unlinked = true  // removed behind our back (the CLI): nothing to store into
            return false
        }
    }
}
