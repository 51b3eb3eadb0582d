import Glibc
import Locking
import Synchronization
import VaultCore

/// The executable and unit of a pid, for the access log only: kept for a second, so `cat` over
/// 10 000 files reads /proc once, not 10 000 times. Access decisions never use this; they read
/// a fresh `ProcessIdentity` (a pid reused within the second would be logged under its former
/// process's name, which a log can live with and a decision cannot).
final class ProcessLabels: Sendable {
    struct Label: Sendable, Equatable {
        let executable: String?
        let unit: String?
    }

    private struct Cached {
        let label: Label
        let expires: Int64
    }

    static let lifetimeNanoseconds: Int64 = 1_000_000_000
    /// Past this many pids, expired ones are dropped before another is added.
    private static let tidyAbove = 4096

    private let cache = OrderedMutex<[pid_t: Cached]>(.processLabels, [:])
    private let procReads = Atomic<Int>(0)

    /// How many times /proc was read (for tests).
    var reads: Int { procReads.load(ordering: .relaxed) }

    func label(for pid: pid_t) -> Label {
        guard pid > 0 else { return Label(executable: nil, unit: nil) }
        let now = ProcessLabels.monotonicNanoseconds()
        if let hit = cache.withLock({ $0[pid] }), hit.expires > now { return hit.label }
        // Read outside the mutex: other pids' records go on meanwhile.
        procReads.add(1, ordering: .relaxed)
        let identity = ProcessIdentity(pid: pid)
        let label = Label(executable: identity.executable?.path, unit: identity.unit)
        cache.withLock { cache in
            if cache.count >= ProcessLabels.tidyAbove { cache = cache.filter { $0.value.expires > now } }
            cache[pid] = Cached(label: label, expires: now + ProcessLabels.lifetimeNanoseconds)
        }
        return label
    }

    static func monotonicNanoseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }
}
