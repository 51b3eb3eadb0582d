import Glibc

/// The one answer every request of a process for a rule waits for while its command runs. The
/// waiters block on a condition variable of their own, so the broker's lock is free meanwhile.
final class PendingConfirmation: @unchecked Sendable {  // `answer` is reached under `mutex` only
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var answer: ConfirmationAnswer?

    init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func wait() -> ConfirmationAnswer {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while answer == nil { pthread_cond_wait(condition, mutex) }
        return answer!
    }

    func fulfil(_ answer: ConfirmationAnswer) {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        self.answer = answer
        pthread_cond_broadcast(condition)
    }
}
