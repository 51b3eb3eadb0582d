import Glibc
import Synchronization
import VaultCore

/// POSIX semantics on top of the vault: inode numbers are node ids, each open descriptor holds
/// its own locked copy of the content, and every store is one durable vault transaction. Knows nothing of libfuse's
/// structs beyond `stat`; the operation table (FUSEOperations) marshals to and from C.
final class FileSystem: Sendable {
    let vault: Vault
    let ownerUID: uid_t
    let ownerGID: gid_t
    /// How long the kernel may cache names and attributes; short, so changes made through the
    /// CLI while mounted show within a second.
    static let cacheSeconds = 0.5

    private let state = Mutex(State())
    /// Called once, when the kernel's INIT has been answered and requests are being served.
    private let onStart: Mutex<(@Sendable () -> Void)?>
    /// When the last request arrived (seconds, CLOCK_MONOTONIC), for the idle lock.
    private let lastActivity = Atomic<Int64>(FileSystem.monotonicSeconds())
    /// The libfuse session, for cache invalidation notices; 0 when there is none.
    private let sessionAddress = Atomic<UInt>(0)
    /// Notices being sent: the session is not destroyed under them.
    private let notifying = Atomic<Int>(0)
    /// Drops an item's pages from the kernel's cache once it is closed (a private mmap
    /// reads through the page cache even with direct I/O).
    let pageCache = PageCacheDropper()

    private struct State {
        var files: [UInt64: OpenFile] = [:]
        var directories: [UInt64: DirectoryListing] = [:]
        var nextHandle: UInt64 = 1
        /// The kernel's lookup count per inode (entries it may hold in its caches).
        var lookupCounts: [UInt64: UInt64] = [:]
        var locked = false
        /// An unlock is deriving its key; a lock asked for meanwhile is kept for when it ends.
        var unlocking = false
        var lockRequested = false

        /// The descriptor holding the newest pending content of a node, if any.
        func pendingWriter(of id: NodeID) -> OpenFile? {
            files.values.filter { $0.id == id && $0.dirty && !$0.unlinked }.max { $0.modified < $1.modified }
        }

        mutating func newHandle() -> UInt64 {
            defer { nextHandle += 1 }
            return nextHandle
        }
    }

    init(vault: Vault, onStart: @escaping @Sendable () -> Void) {
        self.vault = vault
        self.onStart = Mutex(onStart)
        ownerUID = getuid()
        ownerGID = getgid()
    }

    static func monotonicSeconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec)
    }

    func noteActivity() {
        lastActivity.store(FileSystem.monotonicSeconds(), ordering: .relaxed)
    }

    var secondsSinceActivity: Int64 { FileSystem.monotonicSeconds() - lastActivity.load(ordering: .relaxed) }

    func attach(session: OpaquePointer) {
        pageCache.start(session: session)
        sessionAddress.store(UInt(bitPattern: session), ordering: .sequentiallyConsistent)
    }

    /// Stops notices; false if one is still stuck in the kernel after 2 s (it may wait on a
    /// request the finished loop will never answer), in which case the session must not be
    /// destroyed: the process exit closes /dev/fuse and frees it.
    func detachSession() -> Bool {
        pageCache.stop()
        sessionAddress.store(0, ordering: .sequentiallyConsistent)
        for _ in 0..<200 where notifying.load(ordering: .sequentiallyConsistent) > 0 { usleep(10_000) }
        return notifying.load(ordering: .sequentiallyConsistent) == 0
    }

    func sessionDidStart() {
        let callback = onStart.withLock { callback in
            defer { callback = nil }
            return callback
        }
        callback?()
    }

    // MARK: attributes

    func stat(of node: Node, file: OpenFile? = nil) -> stat {
        var st = Glibc.stat()
        st.st_ino = ino_t(node.id.rawValue)
        let permissions = mode_t(node.attributes.mode & 0o7777)
        var size = node.attributes.size
        var modified = node.attributes.modified
        if let file, file.dirty || file.unlinked {
            size = file.content.count
            modified = file.modified
        }
        switch node.kind {
        case .dictionary:
            st.st_mode = S_IFDIR | permissions
            st.st_nlink = 2
            st.st_size = 4096
        case .item:
            st.st_mode = S_IFREG | permissions
            st.st_nlink = 1
            st.st_size = off_t(size)
        }
        st.st_uid = ownerUID
        st.st_gid = ownerGID
        st.st_blksize = 4096
        st.st_blocks = blkcnt_t((st.st_size + 511) / 512)
        st.st_mtim = timespec(tv_sec: Int(modified.seconds), tv_nsec: Int(modified.nanoseconds))
        st.st_atim = st.st_mtim
        st.st_ctim = timespec(tv_sec: Int(node.attributes.changed.seconds), tv_nsec: Int(node.attributes.changed.nanoseconds))
        return st
    }

    /// getattr.
    func attributes(_ inode: UInt64, handle: UInt64?) throws(VaultError) -> Glibc.stat {
        try state.withLock { (state) throws(VaultError) in
            let id = NodeID(Int64(inode))
            if state.locked && id == .root { return lockedRootStat() }
            return try currentStat(id, through: descriptor(handle, of: id, state), state)
        }
    }

    /// The open descriptor `handle` names, if it is one of node `id`.
    private func descriptor(_ handle: UInt64?, of id: NodeID, _ state: borrowing State) -> OpenFile? {
        handle.flatMap { state.files[$0] }.flatMap { $0.id == id ? $0 : nil }
    }

    /// Through a descriptor (fstat) the descriptor's own view, else what a stat by path shows;
    /// a node removed while open still answers through its descriptors.
    private func currentStat(_ id: NodeID, through file: OpenFile?, _ state: borrowing State) throws(VaultError) -> Glibc.stat {
        if let file, file.dirty || file.unlinked { return stat(of: file.node, file: file) }
        do throws(VaultError) {
            return pathStat(of: try vault.node(id), state)
        } catch .notFound {
            guard let open = state.pendingWriter(of: id) ?? state.files.values.first(where: { $0.id == id }) else {
                throw .notFound("node \(id)")
            }
            open.unlinked = true
            return stat(of: open.node, file: open)
        }
    }

    /// What a stat by path, a lookup and a listing all show: the size a pending writer has
    /// reached, else what is stored. The kernel takes the size from any of them, and a stored
    /// size shorter than what a writer already wrote would move that writer's end of file back.
    private func pathStat(of node: Node, _ state: borrowing State) -> Glibc.stat {
        if let writer = state.pendingWriter(of: node.id) { return stat(of: writer.node, file: writer) }
        return stat(of: node)
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

    func lookup(_ parent: UInt64, _ name: ItemName) throws(VaultError) -> Glibc.stat {
        try state.withLock { (state) throws(VaultError) in
            let node = try vault.lookup(name, in: NodeID(Int64(parent)))
            state.lookupCounts[UInt64(node.id.rawValue), default: 0] += 1
            return pathStat(of: node, state)
        }
    }

    /// The kernel dropped `count` references to an inode.
    func forget(_ inode: UInt64, count: UInt64) {
        state.withLock { state in
            guard let known = state.lookupCounts[inode] else { return }
            state.lookupCounts[inode] = known > count ? known - count : nil
        }
    }

    /// chmod, utimens, truncate / ftruncate, chown (accepted, not stored: the mounting user owns
    /// everything). ftruncate changes the descriptor's content, stored with it at close; a
    /// truncate by path is stored at once.
    func setAttributes(_ inode: UInt64, handle: UInt64?, mode: mode_t?, size: Int?, modified: Timestamp?) throws(VaultError) -> Glibc.stat {
        try state.withLock { (state) throws(VaultError) in
            let id = NodeID(Int64(inode))
            let file = descriptor(handle, of: id, state)
            if let size {
                if let file {
                    try resize(file, to: size)  // checks the limit
                } else {
                    try vault.checkItemSize(size)
                    var content = try vault.item(id).takeContent()
                    try content.resize(to: size)
                    _ = try vault.replaceContent(of: id, with: &content)
                }
            }
            if mode != nil || modified != nil {
                // chmod and utimens reach no descriptor (the kernel sends no handle): apply them
                // to every descriptor of the node, so a writer's close keeps them.
                let openFiles = state.files.values.filter { $0.id == id }
                do throws(VaultError) {
                    let node = try vault.setAttributes(of: id, mode: mode.map { UInt32($0) & 0o7777 }, modified: modified)
                    for open in openFiles {
                        open.node.attributes.mode = node.attributes.mode
                        open.node.attributes.changed = node.attributes.changed
                        if let modified { open.modified = modified }
                    }
                } catch .notFound where !openFiles.isEmpty {
                    for open in openFiles {
                        open.unlinked = true
                        if let mode { open.node.attributes.mode = UInt32(mode) & 0o7777 }
                        if let modified { open.modified = modified }
                    }
                }
            }
            return try currentStat(id, through: file, state)
        }
    }

    // MARK: directories

    func makeDirectory(_ parent: UInt64, _ name: ItemName, mode: mode_t) throws(VaultError) -> Glibc.stat {
        // New dictionaries are private: group and other bits are dropped.
        let node = try vault.makeDictionary(named: name, in: NodeID(Int64(parent)), mode: UInt32(mode) & 0o700)
        state.withLock { $0.lookupCounts[UInt64(node.id.rawValue), default: 0] += 1 }
        return stat(of: node)
    }

    func removeDirectory(_ parent: UInt64, _ name: ItemName) throws(VaultError) {
        try vault.remove(named: name, in: NodeID(Int64(parent)), kind: .dictionary)
    }

    func unlink(_ parent: UInt64, _ name: ItemName) throws(VaultError) {
        try state.withLock { (state) throws(VaultError) in
            let removed = try vault.remove(named: name, in: NodeID(Int64(parent)), kind: .item)
            for file in state.files.values where file.id == removed { file.unlinked = true }
        }
    }

    func rename(_ parent: UInt64, _ name: ItemName, to newParent: UInt64, _ newName: ItemName, noReplace: Bool) throws(VaultError) {
        try state.withLock { (state) throws(VaultError) in
            let replaced = try vault.move(name, from: NodeID(Int64(parent)), to: newName, in: NodeID(Int64(newParent)),
                                          replacing: !noReplace)
            if let replaced {
                for file in state.files.values where file.id == replaced { file.unlinked = true }
            }
        }
    }

    /// opendir: checks the dictionary; its entries are listed by the first readdir, which is
    /// also what a rewinddir before any read must see.
    func openDirectory(_ inode: UInt64) throws(VaultError) -> UInt64 {
        guard try vault.node(NodeID(Int64(inode))).kind == .dictionary else { throw .notADictionary("node \(inode)") }
        return try state.withLock { (state) throws(VaultError) in
            guard !state.locked else { throw .locked }
            let handle = state.newHandle()
            state.directories[handle] = DirectoryListing(entries: [], stamp: nil)
            return handle
        }
    }

    private func listDirectory(_ inode: UInt64) throws(VaultError) -> DirectoryListing {
        let id = NodeID(Int64(inode))
        let stamp = try vault.changeStamp()
        let node = try vault.node(id)
        var entries = [
            DirectoryListing.Entry(name: Array(".".utf8), inode: inode, isDictionary: true),
            DirectoryListing.Entry(name: Array("..".utf8), inode: id == .root ? inode : UInt64(node.parent.rawValue), isDictionary: true),
        ]
        for entry in try vault.entries(of: id) {
            entries.append(DirectoryListing.Entry(name: entry.name.bytes, inode: UInt64(entry.node.id.rawValue),
                                                  isDictionary: entry.node.kind == .dictionary, found: .node(entry.node), checkedAt: stamp))
        }
        return DirectoryListing(entries: entries, stamp: stamp)
    }

    /// Makes the handle's listing ready for a read at `offset`: reading from the start (the
    /// first read, or after rewinddir) takes a fresh listing. A listing that a lock wiped is
    /// taken again when nothing changed meanwhile (the same stamp lists the same entries in the
    /// same order), so a long `find` survives an idle lock and unlock; if something changed,
    /// the read fails rather than end the listing early.
    private func prepareListing(_ handle: UInt64, inode: UInt64, from offset: Int) throws(VaultError) {
        let wiped = try state.withLock { (state) throws(VaultError) -> DirectoryListing? in
            guard !state.locked else { throw .locked }
            guard let listing = state.directories[handle] else { throw .invalidArgument("bad directory handle") }
            return listing.wipedCount == nil ? nil : listing
        }
        guard offset == 0 || wiped != nil else { return }
        let fresh = try listDirectory(inode)
        if offset != 0, let wiped, fresh.stamp != wiped.stamp || fresh.entries.count != wiped.wipedCount {
            throw .integrityFailure("the directory changed while the vault was locked; open it again")
        }
        try state.withLock { (state) throws(VaultError) in
            guard !state.locked else { throw .locked }
            state.directories[handle] = fresh
        }
    }

    /// Entries from `offset` on, as listed.
    func directoryEntries(_ handle: UInt64, inode: UInt64, from offset: Int) throws(VaultError) -> ArraySlice<DirectoryListing.Entry> {
        try prepareListing(handle, inode: inode, from: offset)
        return try state.withLock { (state) throws(VaultError) in
            guard !state.locked else { throw .locked }
            guard let listing = state.directories[handle], offset >= 0, offset < listing.entries.count else { return [] }
            return listing.entries[offset...]
        }
    }

    /// readdirplus: entries from `offset` on, each with what a lookup would answer now. A
    /// later part of a listing may be read after something was committed (a rename meanwhile,
    /// a CLI `set`): entries checked before that are looked up again, a batch at a time in one
    /// snapshot, and the listing keeps what was found, so each entry is checked at most once
    /// per change. A name gone is left out; one whose lookup fails goes without attributes (its
    /// own lookup will say why). `pack(name, attributes, asEntry, next)` says whether an entry
    /// fit (`next` is the offset a later read resumes from); each packed as an entry is a
    /// lookup the kernel will later forget, so it is counted like one.
    func directoryEntriesWithAttributes(
        _ handle: UInt64, inode: UInt64, from offset: Int,
        pack: (_ name: [UInt8], _ attributes: Glibc.stat, _ asEntry: Bool, _ next: Int) -> Bool
    ) throws(VaultError) {
        try prepareListing(handle, inode: inode, from: offset)
        let directory = NodeID(Int64(inode))
        try state.withLock { (state) throws(VaultError) in
            guard !state.locked else { throw .locked }
            // Taken out while it changes, so it is changed in place rather than copied.
            guard var listing = state.directories.removeValue(forKey: handle) else { return }
            defer { state.directories[handle] = listing }
            let now = try vault.changeStamp()
            var index = max(offset, 0)
            while index < listing.entries.count {
                let batch = index..<min(index + 64, listing.entries.count)
                let stale = batch.filter { listing.entries[$0].found != nil && listing.entries[$0].checkedAt != now }
                if !stale.isEmpty {
                    var names: [ItemName] = []
                    for position in stale { names.append(try ItemName(bytes: listing.entries[position].name)) }
                    for (position, result) in zip(stale, try vault.lookup(names, in: directory)) {
                        switch result {
                        case .success(let node): listing.entries[position].found = .node(node)
                        case .failure(.notFound): listing.entries[position].found = .gone
                        case .failure: listing.entries[position].found = .unreadable
                        }
                        listing.entries[position].checkedAt = now
                    }
                }
                for position in batch {
                    let entry = listing.entries[position]
                    switch entry.found {
                    case .gone?:
                        continue
                    case .node(let node)?:
                        guard pack(entry.name, pathStat(of: node, state), true, position + 1) else { return }
                        state.lookupCounts[UInt64(node.id.rawValue), default: 0] += 1
                    case nil, .unreadable?:
                        guard pack(entry.name, entry.direntStat, false, position + 1) else { return }
                    }
                }
                index = batch.upperBound
            }
        }
    }

    func releaseDirectory(_ handle: UInt64) {
        _ = state.withLock { $0.directories.removeValue(forKey: handle) }
    }

    // MARK: files

    /// open(2): the descriptor gets the stored content (none with O_TRUNC, stored at close).
    func open(_ inode: UInt64, flags: Int32) throws(VaultError) -> UInt64 {
        try state.withLock { (state) throws(VaultError) in
            let snapshot = try vault.item(NodeID(Int64(inode)))
            let node = snapshot.node
            let truncating = flags & O_TRUNC != 0
            let file = OpenFile(node: node, content: truncating ? try SecureBuffer(capacity: 0) : snapshot.takeContent(),
                                append: flags & O_APPEND != 0)
            if truncating { try resize(file, to: 0) } else if file.append { file.appendedFrom = file.content.count }
            let handle = state.newHandle()
            state.files[handle] = file
            return handle
        }
    }

    func create(_ parent: UInt64, _ name: ItemName, mode: mode_t, flags: Int32) throws(VaultError) -> (Glibc.stat, UInt64) {
        try state.withLock { (state) throws(VaultError) in
            // New items are private: group and other bits are dropped. The row's commit skips its
            // fsync: this descriptor's close stores the item again, durably, before it returns.
            let node = try vault.createItem(named: name, in: NodeID(Int64(parent)), content: try SecureBuffer(capacity: 0),
                                            mode: UInt32(mode) & 0o700, durable: false)
            let file = OpenFile(node: node, content: try SecureBuffer(capacity: 0), append: flags & O_APPEND != 0)
            file.dirty = true
            let handle = state.newHandle()
            state.files[handle] = file
            state.lookupCounts[UInt64(node.id.rawValue), default: 0] += 1
            return (stat(of: node, file: file), handle)
        }
    }

    /// Hands the requested range of plaintext to `reply` straight from locked memory.
    func read(_ handle: UInt64, offset: Int, size: Int, reply: (UnsafeRawBufferPointer) -> Void) throws(VaultError) {
        try state.withLock { (state) throws(VaultError) in
            guard !state.locked else { throw .locked }
            guard let file = state.files[handle] else { throw .invalidArgument("bad file handle") }
            if let refusal = file.refusal { throw refusal }
            try recall(file)
            file.content.withUnsafeBytes { bytes in
                let start = min(max(offset, 0), bytes.count)
                let end = min(start + size, bytes.count)
                reply(UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
            }
        }
    }

    /// Copies written bytes into the descriptor's content; nothing reaches the vault until flush.
    func write(_ handle: UInt64, _ bytes: UnsafeRawBufferPointer, offset: Int) throws(VaultError) -> Int {
        try state.withLock { (state) throws(VaultError) in
            guard !state.locked else { throw .locked }
            guard let file = state.files[handle] else { throw .invalidArgument("bad file handle") }
            if let refusal = file.refusal { throw refusal }
            try recall(file)
            let start = file.append ? file.content.count : offset
            do throws(VaultError) {
                try vault.checkItemSize(start + bytes.count)
            } catch {
                reject(file, because: error)
                throw error
            }
            // Room for the padding too, so storing it needs no second buffer.
            try file.content.reserve(Vault.storageCapacity(forContentOf: start + bytes.count))
            try file.content.write(bytes, at: start)
            file.dirty = true
            file.modified = .now()
            file.lastChange = file.modified
            return bytes.count
        }
    }

    /// A write went past the item limit. The kernel may already have delivered the first parts
    /// of that write, so the descriptor's pending content is dropped and the descriptor refuses
    /// everything after: nothing of the oversized write is ever stored.
    private func reject(_ file: OpenFile, because error: VaultError) {
        file.refusal = error
        file.dirty = false
        if let empty = try? SecureBuffer(capacity: 0) { file.content = empty }
    }

    /// Reloads content that a lock wiped, now that the vault is unlocked again, provided the
    /// item did not change meanwhile (a descriptor never reads two versions).
    private func recall(_ file: OpenFile) throws(VaultError) {
        guard file.forgotten else { return }
        guard !file.unlinked else { throw .integrityFailure("an unlinked file's content was wiped by locking") }
        let snapshot = try vault.item(file.id)
        guard snapshot.node.attributes.contentVersion == file.node.attributes.contentVersion else {
            throw .integrityFailure("the item changed while the vault was locked; reopen it")
        }
        file.content = snapshot.takeContent()
        file.forgotten = false
    }

    private func resize(_ file: OpenFile, to size: Int) throws(VaultError) {
        file.appendedFrom = nil  // no longer a pure append: its whole content is stored
        try vault.checkItemSize(size)
        try recall(file)
        try file.content.resize(to: size)
        file.dirty = true
        file.modified = .now()
        file.lastChange = file.modified
    }

    /// Stores a descriptor's content in one durable transaction; on failure it stays dirty
    /// and the vault keeps the previous content.
    private func commit(_ file: OpenFile) throws(VaultError) {
        guard file.dirty, !file.unlinked else { return }
        do throws(VaultError) {
            if let start = file.appendedFrom {
                // Rebase this descriptor's appended bytes onto the stored content: another
                // appender may have stored its own since we opened.
                var stored = try vault.item(file.id).takeContent()
                let appended = file.content.count - start
                try vault.checkItemSize(stored.count + appended)
                try stored.reserve(Vault.storageCapacity(forContentOf: stored.count + appended))
                try file.content.withUnsafeBytes { (bytes) throws(VaultError) in
                    try stored.append(UnsafeRawBufferPointer(rebasing: bytes[start...]))
                }
                file.content = stored
                file.appendedFrom = file.content.count - appended
            }
            file.node = try vault.replaceContent(of: file.id, with: &file.content, modified: file.modified, changed: file.lastChange)
            file.dirty = false
            if file.appendedFrom != nil { file.appendedFrom = file.content.count }
        } catch .notFound {
            file.unlinked = true  // removed behind our back (the CLI): nothing to store into
        }
    }

    /// flush (every close) and fsync: stores what this descriptor wrote.
    func flush(_ handle: UInt64) throws(VaultError) {
        try state.withLock { (state) throws(VaultError) in
            guard let file = state.files[handle] else { return }
            if let refusal = file.refusal { throw refusal }
            try commit(file)
        }
    }

    /// The last close of a descriptor: store what is left, wipe its content.
    func release(_ handle: UInt64) throws(VaultError) {
        var closed: UInt64? = nil
        // Whatever a private mmap through this descriptor pulled into the page cache goes.
        defer { if let closed { pageCache.drop(closed) } }
        try state.withLock { (state) throws(VaultError) in
            guard let file = state.files.removeValue(forKey: handle) else { return }
            closed = UInt64(file.id.rawValue)
            if file.refusal == nil { try commit(file) }
        }
    }

    func statfs() -> statvfs {
        var st = statvfs()
        let directory = vault.path.contains("/") ? String(vault.path[..<vault.path.lastIndex(of: "/")!]) : "."
        _ = statvfs(directory.isEmpty ? "/" : directory, &st)
        st.f_namemax = UInt(ItemName.maximumBytes)
        return st
    }

    /// access(2) against the stored mode, for callers that ask before acting.
    func access(_ inode: UInt64, mask: Int32, uid: uid_t) throws(VaultError) -> Bool {
        let node = try vault.node(NodeID(Int64(inode)))
        if mask == F_OK || uid == 0 { return mask & X_OK == 0 || node.kind == .dictionary || node.attributes.mode & 0o111 != 0 }
        let owner = (node.attributes.mode >> 6) & 7
        return UInt32(mask) & ~owner == 0
    }

    // MARK: locking

    var isLocked: Bool { state.withLock { $0.locked } }

    /// Locks the mount: pending writes are committed (or, if that fails, refused at their
    /// close), then every plaintext buffer, name listing and key is wiped, and the kernel is told
    /// to drop the names and attributes it caches. Open descriptors stay open and answer EACCES
    /// until unlock.
    func lock() {
        var entries: [(parent: UInt64, name: [UInt8])] = []
        var inodes: [UInt64] = []
        state.withLock { state in
            guard !state.locked else {
                if state.unlocking { state.lockRequested = true }
                return
            }
            // Unfinished writes are refused, not stored half-written: their descriptors answer
            // EACCES from now on and their close reports it.
            for file in state.files.values where file.dirty && !file.unlinked {
                file.refusal = .locked
                file.dirty = false
            }
            // Names of what the kernel caches, decrypted while the keys still exist.
            for inode in state.lookupCounts.keys where inode != UInt64(NodeID.root.rawValue) {
                inodes.append(inode)
                if let node = try? vault.node(NodeID(Int64(inode))), let name = try? vault.name(of: node.id) {
                    entries.append((UInt64(node.parent.rawValue), name.bytes))
                }
            }
            for file in state.files.values {
                if let empty = try? SecureBuffer(capacity: 0) { file.content = empty }
                file.forgotten = true
            }
            // Open directory handles stay open: their names go, what comes back after unlock
            // is decided when they are read again.
            state.directories = state.directories.mapValues { listing in
                DirectoryListing(entries: [], stamp: listing.stamp, wipedCount: listing.wipedCount ?? listing.entries.count)
            }
            state.locked = true
            vault.lock()
        }
        invalidateKernelCaches(entries: entries, inodes: inodes + [UInt64(NodeID.root.rawValue)])
        for index in entries.indices {
            wipe(&entries[index].name)
        }
    }

    /// Stores every descriptor's unstored writes before an exit wipes them (an unmount is a
    /// last close for all of them); a failure is lost with the process, as with any close.
    private func commitPendingWrites(_ state: borrowing State) {
        for file in state.files.values where file.dirty && !file.unlinked && file.refusal == nil {
            try? commit(file)
        }
    }

    /// Outside our mutex and never on the session loop's thread: the kernel may need the loop
    /// to answer other requests before it can drop an entry.
    private func invalidateKernelCaches(entries: [(parent: UInt64, name: [UInt8])], inodes: [UInt64]) {
        notifying.add(1, ordering: .sequentiallyConsistent)
        defer { notifying.subtract(1, ordering: .sequentiallyConsistent) }
        let address = sessionAddress.load(ordering: .sequentiallyConsistent)
        guard address != 0, let session = OpaquePointer(bitPattern: address) else { return }
        FUSENotifications.invalidate(session: session, entries: entries, inodes: inodes)
    }

    /// Unlocks with a passphrase; a wrong one leaves everything locked.
    func unlock(passphrase: borrowing SecureBuffer) throws(VaultError) {
        state.withLock { state in
            state.unlocking = true
            state.lockRequested = false
        }
        var unlocked = false
        defer {
            state.withLock { state in
                state.unlocking = false
                if unlocked && !state.lockRequested { state.locked = false }
            }
            if unlocked {
                // Idle time starts again now, or the idle lock would undo this at once.
                noteActivity()
            }
        }
        try vault.unlock(passphrase: passphrase)
        unlocked = true
        // A lock asked for during the key derivation wins.
        if state.withLock({ $0.lockRequested }) { vault.lock() }
    }

    /// Stores pending writes, then wipes every open item's plaintext and the keys (unmount,
    /// or the end of the session loop, whatever ended it).
    func forgetEverything() {
        state.withLock { state in
            if !state.locked { commitPendingWrites(state) }
            state.files.removeAll()
            state.directories.removeAll()
            state.locked = true
        }
        vault.lock()
    }
}
