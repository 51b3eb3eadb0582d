import Glibc

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
        while sem_wait(semaphore) != 0 && errno == EINTR {}
    }

    /// Until a signal or the CLOCK_REALTIME `deadline`; false when the deadline came first.
    package func wait(until deadline: timespec) -> Bool {
        var deadline = deadline
        while sem_timedwait(semaphore, &deadline) != 0 {
            if errno != EINTR { return false }
        }
        return true
    }
}
