import Glibc
import Locking
import Synchronization

/// Processes lately found free of the doubts that only an exec or a new mapping can raise (their
/// loader variables and the code they map), so that the next decisions about the same living
/// process, running the same executable, within a second need not read `environ` and `maps`
/// again: a program reading an item makes three requests (open, read, read at the end), and
/// each is judged. What can change without an exec is read every time: its tracer and its user
/// namespace. The cost of the window: a library the process maps in that second is seen only
/// at the next reading.
public final class ProcessClearances: Sendable {
    private struct Clearance: Sendable {
        let identity: ProcessIdentity
        let executable: FileIdentity
        let until: ContinuousClock.Instant
    }

    private let cleared = OrderedMutex<[pid_t: Clearance]>(.processClearances, [:])
    /// Each clearance holds a pidfd and a /proc directory open: a bound on both.
    private static let capacity = 64
    private static let lifetime = Duration.seconds(1)

    public init() {}

    /// Whether `identity` is a process cleared within the last second that still lives and
    /// still runs the executable it ran then.
    func holds(for identity: ProcessIdentity) -> Bool {
        guard let executable = identity.executable?.file else { return false }
        let found = cleared.withLock { $0[identity.pid] }
        guard let found, found.until > .now, found.executable == executable else { return false }
        // The pid is the same process only while the one cleared lives: it cannot be reused before.
        return found.identity.isAlive
    }

    func record(_ identity: ProcessIdentity) {
        guard let executable = identity.executable?.file else { return }
        let now = ContinuousClock.now
        cleared.withLock { cleared in
            if cleared.count >= ProcessClearances.capacity {
                cleared = cleared.filter { $0.value.until > now }
                if cleared.count >= ProcessClearances.capacity { cleared.removeAll() }
            }
            cleared[identity.pid] = Clearance(identity: identity, executable: executable, until: now + ProcessClearances.lifetime)
        }
    }
}
