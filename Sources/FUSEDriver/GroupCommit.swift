import CFuse
import Glibc
import Locking
import Support
import Synchronization
import VaultCore

/// Group commit for the closes and fsyncs of written files. Each stores its content at once
/// (committed: seen by every reader and kept through a crash of the daemon) without a sync of
/// its own, and is answered from this thread after one sync of everything committed so far
/// (`Vault.syncCarriedCommits`: one fdatasync of the WAL, or one synchronous commit on
/// PostgreSQL). Closes that arrive while a sync runs share the next one (eight writers at once:
/// 2 874 syncs for 4 000 closes, see docs/performance.md), and the session loop goes on serving
/// meanwhile. A close or fsync still returns only once what it stored is durable.
package final class GroupCommit: Sendable {
    /// A request answered once the sync after its commit is done.
    private struct Waiting: @unchecked Sendable {  // libfuse answers a request from any thread
        let req: fuse_req_t?
    }

    private let vault: Vault
    private let waiting = OrderedMutex<[Waiting]>(.groupCommit, [])
    /// Requests taken and not answered yet: the session is not destroyed under them.
    private let unanswered = Atomic<Int>(0)
    private let wakeup = Semaphore()
    private let stoppedThread = Semaphore()
    private let stopping = Atomic<Bool>(false)
    private let started = Atomic<Bool>(false)

    private let syncsAlongside: Bool

    init(vault: Vault) {
        self.vault = vault
        syncsAlongside = vault.syncsAlongsideCommits
    }

    /// Whether its thread runs; without it, every close syncs its own commit.
    var isRunning: Bool { started.load(ordering: .acquiring) && !stopping.load(ordering: .acquiring) }

    /// Whether a close or fsync now should leave its sync to this thread. Where the sync is
    /// itself a commit on the storage's one connection (PostgreSQL), a close that finds no
    /// other waiting commits durably instead: the same one synchronous commit, without a
    /// second round trip for the sync; closes that come while a sync is under way still share
    /// the next one.
    var takesNext: Bool {
        isRunning && (syncsAlongside || isAnswering)
    }

    /// Whether a request waits for its answer.
    var isAnswering: Bool { unanswered.load(ordering: .sequentiallyConsistent) > 0 }

    /// Answers `req` (0, or the sync's errno) once everything committed before this call is durable.
    func answerWhenDurable(_ req: fuse_req_t?) {
        unanswered.add(1, ordering: .sequentiallyConsistent)
        waiting.withLock { $0.append(Waiting(req: req)) }
        wakeup.signal()
    }

    /// Starts the thread; false when it could not be started (the caller then syncs each itself).
    package func start() -> Bool {
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { return true }
        let running = HelperThread.start { [self] in
            while true {
                // Once stopping, whatever is left is answered without waiting for a post.
                if !stopping.load(ordering: .acquiring) {
                    wakeup.wait()
                }
                let batch = waiting.withLock { (list) -> [Waiting] in
                    defer { list.removeAll(keepingCapacity: true) }
                    return list
                }
                if batch.isEmpty {
                    if stopping.load(ordering: .acquiring) { break }
                    continue
                }
                let status: Int32
                do throws(VaultError) {
                    try vault.syncCarriedCommits()
                    status = 0
                } catch {
                    // The content is committed but not known to be durable: each close in the
                    // batch fails, as a close or fsync does when the disk fails its sync.
                    DaemonLog.syncFailed(error)
                    status = error.errno
                }
                for request in batch { fuse_reply_err(request.req, status) }
                unanswered.subtract(batch.count, ordering: .sequentiallyConsistent)
            }
            stoppedThread.signal()
        }
        if !running { started.store(false, ordering: .releasing) }
        return running
    }

    /// Answers what waits and ends the thread (unmount, once no request can come).
    package func stop() {
        guard started.load(ordering: .acquiring), !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        wakeup.signal()
        stoppedThread.wait()
    }
}
