import Glibc
import SystemCalls

/// A POSIX semaphore for a helper thread: its wake-ups, and telling that it ended. Allocated
/// once, so its address never moves (a sem_t must not be copied), and destroyed with its owner.
package final class Semaphore: @unchecked Sendable {  // sem_post and sem_wait are made for threads
    private let semaphore: UnsafeMutablePointer<sem_t>

    package init() {
        semaphore = .allocate(capacity: 1)
        sem_init(semaphore, 0, 0)
    }

    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }

    package func signal() {
        sem_post(semaphore)
    }

    /// Until a signal, through interruptions by signals.
    package func wait() {
        _ = try? SystemCall.retrying { sem_wait(semaphore) }
    }

    /// Until a signal or the CLOCK_REALTIME `deadline`; false when the deadline came first.
    package func wait(until deadline: timespec) -> Bool {
        var deadline = deadline
        return (try? SystemCall.retrying { sem_timedwait(semaphore, &deadline) }) != nil
    }
}
