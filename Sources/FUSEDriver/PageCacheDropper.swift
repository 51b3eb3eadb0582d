import CFuse
import Glibc
import Locking
import Support
import Synchronization

/// Sends page-cache invalidations from a helper thread: the session loop must never wait on
/// the kernel, which may need the loop to answer a request before it can drop a page.
final class PageCacheDropper: Sendable {
    private let pending = OrderedMutex<[UInt64]>(.pageCacheDropper, [])
    private let session = Atomic<UInt>(0)
    private let running = Atomic<Bool>(false)
    private let wake: (read: Int32, write: Int32)

    init() {
        var fds: [Int32] = [-1, -1]
        _ = pipe(&fds)
        // A full pipe already holds a wake-up: the session loop must never block on it.
        _ = fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK)
        wake = (fds[0], fds[1])
    }

    func start(session: OpaquePointer) {
        self.session.store(UInt(bitPattern: session), ordering: .sequentiallyConsistent)
        running.store(true, ordering: .sequentiallyConsistent)
        HelperThread.start { [self] in
            var byte: UInt8 = 0
            while read(wake.read, &byte, 1) > 0 {
                // Serve what is queued, then give closes a moment to queue more before looking
                // again: a stream of closes (`cat dir/*`) costs one wake-up per batch, not per
                // file, and the first of a batch is served at once.
                while true {
                    let inodes = pending.withLock { queued in
                        defer { queued.removeAll() }
                        return queued
                    }
                    if inodes.isEmpty { break }
                    let address = self.session.load(ordering: .sequentiallyConsistent)
                    guard address != 0, let session = OpaquePointer(bitPattern: address) else { break }
                    for inode in Set(inodes) { _ = fuse_lowlevel_notify_inval_inode(session, fuse_ino_t(inode), 0, 0) }
                    usleep(2_000)
                }
            }
            running.store(false, ordering: .sequentiallyConsistent)
        }
    }

    func drop(_ inode: UInt64) {
        // One wake-up serves every inode queued before the thread takes the queue.
        let wasIdle = pending.withLock { queued in
            defer { queued.append(inode) }
            return queued.isEmpty
        }
        guard wasIdle else { return }
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
    }

    /// Stops the thread and waits for it, so no notice is sent to a session being destroyed.
    func stop() {
        session.store(0, ordering: .sequentiallyConsistent)
        close(wake.write)
        for _ in 0..<200 where running.load(ordering: .sequentiallyConsistent) { usleep(5_000) }
    }
}
