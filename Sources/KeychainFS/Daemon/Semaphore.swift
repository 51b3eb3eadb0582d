import Glibc

/// A POSIX semaphore for a helper thread: its wake-ups, and telling that it ended. Allocated
/// once, so its address never moves (a sem_t must not be copied), and destroyed with its owner.
final class Semaphore: @unchecked Sendable {  // sem_post and sem_wait are made for threads
    private let semaphore: UnsafeMutablePointer<sem_t>

    init() {
        semaphore = .allocate(capacity: 1)
        sem_init(semaphore, 0, 0)
    }

    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }

    func signal() {
        sem_post(semaphore)
    }

    /// Until a signal, through interruptions by signals.
    func wait() {
        while sem_wait(semaphore) != 0 && errno == EINTR {}
    }

    /// Until a signal or for at most `nanoseconds`, whichever comes first. (sem_timedwait
    /// counts on the wall clock; a clock step only makes this one wait shorter or longer.)
    func wait(nanoseconds: Int64) {
        var deadline = timespec()
        clock_gettime(CLOCK_REALTIME, &deadline)
        let total = Int64(deadline.tv_nsec) + max(nanoseconds, 0)
        deadline.tv_sec += Int(total / 1_000_000_000)
        deadline.tv_nsec = Int(total % 1_000_000_000)
        while sem_timedwait(semaphore, &deadline) != 0 && errno == EINTR {}
    }
}
