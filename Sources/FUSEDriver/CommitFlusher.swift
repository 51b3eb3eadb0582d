import Glibc
import Support
import Synchronization
import SystemCalls
import VaultCore

/// Makes the mount's namespace changes (mkdir, rmdir, unlink, rename, chmod, utimens, setxattr,
/// removexattr) durable within a bounded window, as a journaling filesystem's commit interval
/// does: they commit at once, atomically and visible to all, without their own sync (`durable: false`), so a crash
/// of the daemon loses none (SQLite's WAL, PostgreSQL's commit), and a helper thread syncs them
/// `window` after the first of a batch (`Vault.syncCarriedCommits`: one fdatasync of the WAL,
/// or one synchronous commit on PostgreSQL), however many came meanwhile. A power loss may
/// lose the changes of the last window and its sync. A written item is still durable at its
/// close, and fsync of a file or a directory (`syncNow`) makes everything before it durable.
package final class CommitFlusher: Sendable {
    private let vault: Vault
    /// How long after the first unsynced change its sync starts.
    let window: Duration
    /// A sync is due: set by the first change of a batch, cleared as its sync starts.
    private let scheduled = Atomic<Bool>(false)
    private let stopping = Atomic<Bool>(false)
    private let started = Atomic<Bool>(false)
    private let wakeup = Semaphore()
    private let stoppedThread = Semaphore()
    /// A pipe `stop` writes to, ending the window's wait at once: read end, write end.
    private let stopSignal: Int32
    private let stopSignalWriter: Int32

    /// 50 ms, so that the sync (an fdatasync, about 1 to 10 ms on this machine's disk, see
    /// docs/durability.md) ends well within 100 ms of the change; one sync per 50 ms costs a writer who
    /// never stops a few percent at most.
    package static let defaultWindow: Duration = .milliseconds(50)

    package init(vault: Vault, window: Duration = CommitFlusher.defaultWindow) {
        self.vault = vault
        self.window = window
        var ends: [Int32] = [-1, -1]
        if pipe(&ends) == 0 {
            for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        }
        (stopSignal, stopSignalWriter) = (ends[0], ends[1])
    }

    deinit {
        for end in [stopSignal, stopSignalWriter] where end >= 0 { close(end) }
    }

    /// Whether its thread runs (`start`).
    package var isRunning: Bool { started.load(ordering: .acquiring) }

    /// After a commit made with `durable: false`: the next sync takes it (one post per batch).
    func changed() {
        if !scheduled.exchange(true, ordering: .acquiringAndReleasing) { wakeup.signal() }
    }

    /// fsync of a directory or a file: everything committed so far is durable on return.
    func syncNow() throws(VaultError) {
        try vault.syncCarriedCommits()
    }

    /// Starts the thread that syncs; false when no thread could be started (every change is
    /// then left to `syncNow`, a durable commit or `stop`: the caller falls back to durable
    /// commits instead).
    package func start() -> Bool {
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { return true }
        let running = HelperThread.start { [self] in
            while !stopping.load(ordering: .acquiring) {
                wakeup.wait()
                if stopping.load(ordering: .acquiring) { break }
                // The window, cut short by `stop` only (which syncs what is left).
                if stopRequested(within: window) { break }
                // Cleared before the sync: a change committed from here on may be too late for
                // it, so it schedules the next.
                scheduled.store(false, ordering: .releasing)
                syncReportingFailure()
                reclaimSpace()
            }
            stoppedThread.signal()
        }
        if !running { started.store(false, ordering: .releasing) }
        return running
    }

    /// When the WAL was last looked at for trimming (nanoseconds, CLOCK_MONOTONIC); only the
    /// flusher's thread touches it.
    private let lastLogTrim = Atomic<Int64>(0)
    /// At most one trim of the WAL per this long: each is a checkpoint with a sync of the vault
    /// file, and trimming whenever a sync found no new change made 91 of them in 7 s of `echo >`.
    static let logTrimInterval: Int64 = 1_000_000_000

    /// Namespace changes are what frees space (unlink, rmdir, a rename over an item), given back
    /// after their sync; the WAL too once the work has paused (no change came during the sync),
    /// at most once per `logTrimInterval`: a pause that comes sooner is looked at again when the
    /// interval is up, by one more pass of this thread. A failure leaves the space for the next
    /// writes and the next try.
    private func reclaimSpace() {
        let paused = !scheduled.load(ordering: .acquiring)
        let now = FileSystem.monotonicNanoseconds()
        let trimming = paused && now - lastLogTrim.load(ordering: .relaxed) >= CommitFlusher.logTrimInterval
        if trimming { lastLogTrim.store(now, ordering: .relaxed) }
        _ = try? vault.reclaimFreeSpace(trimmingLog: trimming)
        if paused && !trimming { changed() }
    }

    /// Waits `duration` (poll's timeout), or until `stop` writes to `stopSignal`; true in that case.
    private func stopRequested(within duration: Duration) -> Bool {
        do {
            return try SystemCall.poll(stopSignal, for: Int16(POLLIN), within: duration) != 0
        } catch {
            return stopping.load(ordering: .acquiring)
        }
    }

    /// Ends the thread and syncs what is left (unmount).
    package func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if started.load(ordering: .acquiring) {
            var one: UInt8 = 1
            _ = write(stopSignalWriter, &one, 1)
            wakeup.signal()
            stoppedThread.wait()
        }
        syncReportingFailure()
    }

    /// A failed sync leaves the changes pending (`Vault.syncCarriedCommits` clears nothing then):
    /// the next change, fsync or unmount tries again; the log says so, as nobody waits for it.
    private func syncReportingFailure() {
        do throws(VaultError) {
            try vault.syncCarriedCommits()
        } catch {
            DaemonLog.syncFailed(error)
        }
    }
}
