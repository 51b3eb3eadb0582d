import Glibc
import Locking
import Support
import Synchronization
import VaultCore

/// The mount's access log: `record` appends to an in-memory batch and returns (no I/O, no path
/// resolution: a node id, a time and the pid's cached labels), and a helper thread commits the
/// batch at most once a second, as one durable transaction, so entries are on disk within about
/// a second and a read never costs an fsync. `flush` commits at once (at lock and unmount).
///
/// It holds only the log's public key (`AccessLogSealer`), so it goes on logging while the
/// vault is locked, and nothing in the daemon's memory can read an entry once written. Paths
/// are resolved from node ids when a batch is flushed, on the flushing thread, while the vault
/// is unlocked; a batch flushed while locked keeps the node ids, and `keychainfs log`, holding
/// the keys, resolves them.
///
/// What waits in memory is ids, times, pids, executables, units and denial reasons, none of
/// them secret; a name (of an entry about to be created) is an `ItemName`, wiped with its last
/// copy. Paths exist only from the flush on, in wiped names, then in the batch's locked memory.
package final class AccessLogWriter: Sendable {
    private struct Pending {
        var entry: AccessLogEntry
        /// An entry of `entry.node` that the access was about (a create): appended to its path.
        var name: ItemName?
    }

    let bounds: AccessLogBounds
    private let vault: Vault
    private let sealer: AccessLogSealer
    private let labels = ProcessLabels()
    private let pending = OrderedMutex<[Pending]>(.accessLogPending, [])
    /// One flush at a time, so batches commit in the order their entries were recorded.
    private let flushing = OrderedMutex<Void>(.accessLogFlushing, ())
    private let wakeup = Semaphore()
    private let stopping = Atomic<Bool>(false)
    private let started = Atomic<Bool>(false)
    private let stoppedThread = Semaphore()
    /// The flush thread waits this long after a flush before the next.
    static let interval: Int64 = 1_000_000_000

    /// nil when `bounds` turn logging off. The vault must be unlocked (the public key is
    /// derived from the master key).
    init?(vault: Vault, bounds: AccessLogBounds) throws(VaultError) {
        guard bounds.isEnabled else { return nil }
        self.vault = vault
        self.bounds = bounds
        sealer = try vault.accessLogSealer()
    }

    /// A daemon's writer, started (nil when `bounds` turn logging off); made while the vault
    /// is unlocked.
    package static func started(vault: Vault, bounds: AccessLogBounds) throws(CommandFailure) -> AccessLogWriter? {
        let writer: AccessLogWriter?
        do throws(VaultError) {
            writer = try AccessLogWriter(vault: vault, bounds: bounds)
        } catch {
            throw CommandFailure(error)
        }
        writer?.start()
        return writer
    }

    // MARK: recording (any thread, never blocks on I/O)

    /// An access by `pid` to `node` (or to the entry `name` of dictionary `node`).
    func record(pid: pid_t, access: LoggedAccess, decision: LoggedDecision, node: NodeID?, name: ItemName? = nil) {
        let label = labels.label(for: pid)
        append(Pending(entry: AccessLogEntry(time: .now(), pid: pid, executable: label.executable, unit: label.unit, node: node,
                                             access: access, decision: decision), name: name))
    }

    /// An entry as given (a lock, an unlock: pid 0 when no process caused it). Labels missing
    /// for a real pid are filled in from the cache.
    func record(_ entry: AccessLogEntry) {
        var entry = entry
        if entry.pid > 0, entry.executable == nil, entry.unit == nil {
            let label = labels.label(for: entry.pid)
            entry.executable = label.executable
            entry.unit = label.unit
        }
        append(Pending(entry: entry, name: nil))
    }

    private func append(_ item: Pending) {
        let wasEmpty = pending.withLock { pending in
            pending.append(item)
            return pending.count == 1
        }
        // Only the first entry of a batch wakes the flush thread: one post per batch.
        if wasEmpty { wakeup.signal() }
    }

    /// Entries recorded and not yet committed.
    var pendingCount: Int { pending.withLock { $0.count } }

    // MARK: flushing

    /// Starts the thread that commits batches.
    func start() {
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { return }
        HelperThread.start { [self] in
            var lastFlush = ProcessLabels.monotonicNanoseconds() - AccessLogWriter.interval
            while !stopping.load(ordering: .acquiring) {
                wakeup.wait()
                if stopping.load(ordering: .acquiring) { break }
                // Until the interval is over, or at once when stopping: an unmount must not wait
                // it out (a mount of the vault right after waits for this daemon to end). A
                // record's wake-up meanwhile is one for the flush this wait leads to anyway.
                while !stopping.load(ordering: .acquiring) {
                    let wait = lastFlush + AccessLogWriter.interval - ProcessLabels.monotonicNanoseconds()
                    if wait <= 0 { break }
                    // sem_timedwait counts on the wall clock; a step of it only makes this one
                    // wait shorter or longer.
                    var deadline = timespec()
                    clock_gettime(CLOCK_REALTIME, &deadline)
                    let nanoseconds = Int64(deadline.tv_nsec) + wait
                    deadline.tv_sec += Int(nanoseconds / 1_000_000_000)
                    deadline.tv_nsec = Int(nanoseconds % 1_000_000_000)
                    _ = wakeup.wait(until: deadline)
                }
                if stopping.load(ordering: .acquiring) { break }
                lastFlush = ProcessLabels.monotonicNanoseconds()
                flushReportingFailure()
                StackWipe.here()  // entries name items: the paths were plaintext here
            }
            stoppedThread.signal()
        }
    }

    /// Commits what is pending now, as one durable transaction; works while locked. On failure
    /// the entries stay pending (up to the entry bound, oldest dropped first) for the next try.
    func flush() throws(VaultError) {
        try flushing.withLock { (_) throws(VaultError) in
            let batch = pending.withLock { pending in
                let taken = pending
                pending.removeAll()
                return taken
            }
            guard !batch.isEmpty else { return }
            let entries = resolved(batch)
            do throws(VaultError) {
                try vault.appendAccessLog(entries, sealer: sealer, bounds: bounds)
            } catch {
                pending.withLock { pending in
                    pending.insert(contentsOf: batch, at: 0)
                    if pending.count > bounds.entries { pending.removeFirst(pending.count - bounds.entries) }
                }
                throw error
            }
        }
    }

    /// `flush`, with a failure going to the daemon's log (there is no caller to tell).
    func flushReportingFailure() {
        do throws(VaultError) {
            try flush()
        } catch {
            DaemonLog.accessLogWriteFailed(error, entries: pendingCount)
        }
    }

    /// Flushes and ends the flush thread (unmount; tests).
    package func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if started.load(ordering: .acquiring) {
            wakeup.signal()
            stoppedThread.wait()
        }
        flushReportingFailure()
    }

    /// The batch with paths: the nodes of all its entries resolved in one snapshot (each node
    /// read once). Locked, or a node gone: the entry keeps its node id only.
    private func resolved(_ batch: [Pending]) -> [AccessLogEntry] {
        let nodes = Set(batch.compactMap { $0.entry.path == nil ? $0.entry.node : nil })
        let paths = nodes.isEmpty ? [:] : ((try? vault.paths(of: nodes)) ?? [:])
        return batch.map { item in
            var entry = item.entry
            if entry.path == nil, let node = entry.node, let path = paths[node] {
                entry.path = item.name.map { path.appending($0) } ?? path
                entry.node = nil
            }
            return entry
        }
    }
}
