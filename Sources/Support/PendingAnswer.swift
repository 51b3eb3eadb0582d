import Glibc

/// One answer that threads wait for while it is worked out elsewhere (a confirmation's dialog,
/// or a request judged after one). The waiters block on a condition variable of their own, so
/// whatever lock the answering side takes is free meanwhile.
package final class PendingAnswer<Answer: Sendable>: @unchecked Sendable {  // `answer` is reached under `mutex` only
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var answer: Answer?
    private var answered = false

    package init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    package func wait() -> Answer {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while !answered { pthread_cond_wait(condition, mutex) }
        return answer!
    }

    package func fulfil(_ answer: Answer) {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        self.answer = answer
        answered = true
        pthread_cond_broadcast(condition)
    }
}
