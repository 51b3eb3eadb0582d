import Admission
import Glibc
import Locking
import Synchronization
import VaultCore

/// POSIX semantics on top of the vault, in the manner of libfuse's passthrough_hp: inode
/// numbers are node ids, the descriptors of a node share one plaintext in locked memory
/// (OpenItem), and every store is one durable vault transaction. The operations are split by
/// family (FileSystem+Attributes, +Namespace, +Directories, +Files, +Locking); the tables they
/// keep (open items, directory handles, the kernel's lookups, the lock) are types of their own
/// under one mutex, because a lock must wipe all of them at once. Knows nothing of libfuse's
/// structs beyond `stat`; FUSEOperations marshals to and from C.
package final class FileSystem: Sendable {
    package let vault: Vault
    /// The access rules, asked before every request they guard (FUSEOperations).
    package let gate: AccessGate
    let ownerUID: uid_t
    let ownerGID: gid_t
    /// How long the kernel may cache names and attributes; short, so changes made through the
    /// CLI while mounted show within a second.
    package static let cacheSeconds = 0.5

    struct State {
        var openItems = OpenItems()
        var directories = DirectoryHandles()
        var lookups = LookupCounts()
        var lock = LockState()
        private var nextHandle: UInt64 = 1

        mutating func newHandle() -> UInt64 {
            defer { nextHandle += 1 }
            return nextHandle
        }
    }

    let state = OrderedMutex(.fileSystem, State())
    /// Called once, when the kernel's INIT has been answered and requests are being served.
    private let onStart: OrderedMutex<(@Sendable () -> Void)?>
    /// When the last request arrived (nanoseconds, CLOCK_MONOTONIC), for the idle lock: whole
    /// seconds would let it fire up to a second early (activity at 10.9 s, a check at 11.0 s).
    private let lastActivity = Atomic<Int64>(FileSystem.monotonicNanoseconds())
    /// The libfuse session, for cache invalidation notices; 0 when there is none.
    private let sessionAddress = Atomic<UInt>(0)
    /// Notices being sent: the session is not destroyed under them.
    private let notifying = Atomic<Int>(0)
    /// Requests waiting for a confirmation on threads of their own, to be answered later: the
    /// session is not destroyed under them either.
    let answeringLater = Atomic<Int>(0)
    /// The session thread's stack, wiped on that thread when the mount is locked.
    let sessionStack = SessionStackWipe()
    /// Drops an item's pages from the kernel's cache once it is closed (a private mmap
    /// reads through the page cache even with direct I/O).
    let pageCache = PageCacheDropper()
    /// Where a read that spans content blocks gathers them (used under `state`'s lock).
    let scratch = ContentScratch()
    /// Negotiates shared mappings and io_uring queues with the kernel, which libfuse 3.14 cannot.
    let initNegotiation = InitNegotiation()
    /// The io_uring queues when the session serves through them (`FUSESession`); idle otherwise.
    let ring = FUSERing()
    /// Syncs namespace changes within its window; nil: each is durable before its call returns
    /// (`--sync`, and file systems made without one).
    let flusher: CommitFlusher?
    /// Syncs the stores of closes and fsyncs together and answers them (`MountDaemon` starts
    /// it); while it is not running each store is durable before its call returns.
    package let groupCommit: GroupCommit

    package init(vault: Vault, gate: AccessGate, flusher: CommitFlusher? = nil, onStart: @escaping @Sendable () -> Void) {
        self.vault = vault
        self.flusher = flusher
        groupCommit = GroupCommit(vault: vault)
        self.gate = gate
        self.onStart = OrderedMutex(.fileSystemOnStart, onStart)
        ownerUID = getuid()
        ownerGID = getgid()
    }

    /// How the kernel's requests come now (`keychainfs status`).
    package var transportInUse: FUSETransport { ring.isServing ? .ioUring : .devFuse }

    package static func monotonicSeconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec)
    }

    static func monotonicNanoseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }

    package func noteActivity() {
        lastActivity.store(FileSystem.monotonicNanoseconds(), ordering: .relaxed)
    }

    /// Whole seconds since the last request, rounded down.
    package var secondsSinceActivity: Int64 { (FileSystem.monotonicNanoseconds() - lastActivity.load(ordering: .relaxed)) / 1_000_000_000 }

    func attach(session: OpaquePointer) {
        pageCache.start(session: session)
        sessionAddress.store(UInt(bitPattern: session), ordering: .sequentiallyConsistent)
    }

    /// Stops notices; false if one is still stuck in the kernel after 2 s (it may wait on a
    /// request the finished loop will never answer), or a request still waits for a
    /// confirmation (its thread answers it later, up to the command's timeout), in which case
    /// the session must not be destroyed: the process exit closes /dev/fuse and frees it.
    func detachSession() -> Bool {
        pageCache.stop()
        sessionAddress.store(0, ordering: .sequentiallyConsistent)
        func busy() -> Bool {
            notifying.load(ordering: .sequentiallyConsistent) > 0 || answeringLater.load(ordering: .sequentiallyConsistent) > 0
                || groupCommit.isAnswering
        }
        for _ in 0..<200 where busy() { usleep(10_000) }
        return !busy()
    }

    func sessionDidStart() {
        let callback = onStart.withLock { callback in
            defer { callback = nil }
            return callback
        }
        callback?()
    }

    /// Outside our mutex and never on the session loop's thread: the kernel may need the loop
    /// to answer other requests before it can drop an entry.
    package func invalidateKernelCaches(entries: [(parent: UInt64, name: ItemName)], inodes: [UInt64]) {
        notifying.add(1, ordering: .sequentiallyConsistent)
        defer { notifying.subtract(1, ordering: .sequentiallyConsistent) }
        let address = sessionAddress.load(ordering: .sequentiallyConsistent)
        guard address != 0, let session = OpaquePointer(bitPattern: address) else { return }
        FUSENotifications.invalidate(session: session, entries: entries, inodes: inodes)
    }

    func statfs() -> statvfs {
        var st = statvfs()
        let directory = vault.path.contains("/") ? String(vault.path[..<vault.path.lastIndex(of: "/")!]) : "."
        _ = statvfs(directory.isEmpty ? "/" : directory, &st)
        st.f_namemax = UInt(ItemName.maximumBytes)
        return st
    }
}
