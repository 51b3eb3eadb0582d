import Glibc
import Locking
import Support
import Synchronization

/// The session thread's stack wipe, done on that thread when a lock asks for it: wiping after
/// every request would cost each request a few µs, so it wipes when it goes idle (a
/// `cat` ends with one) and, if it is busy when a lock comes, right after the request it is
/// serving. The lock waits for it, so the lock's caller sees no plaintext left once it returns.
final class SessionStackWipe: Sendable {
    private struct State {
        /// Nothing handled since the last wipe: the thread waits for the next request.
        var clean = false
        var requested: UInt64 = 0
        var done: UInt64 = 0
        var ended = false
        var waiters = 0
    }

    private let state = OrderedMutex(.sessionStackState, State())
    /// Read after every request: a load, so a busy thread pays nothing when no lock is pending.
    private let pending = Atomic<Bool>(false)
    private let wiped = Semaphore()
    private let sessionThread = OrderedMutex<pthread_t?>(.sessionStackThread, nil)

    func started() {
        sessionThread.withLock { $0 = pthread_self() }
    }

    /// On the session thread, after a request: wipes if a lock is waiting.
    @inline(__always)
    func afterRequest() {
        if pending.load(ordering: .relaxed) { wipe() }
    }

    /// On the session thread, before it may block for the next request.
    func willWait() {
        wipe()
    }

    /// On the session thread, when it wakes with a request to serve.
    func woke() {
        state.withLock { $0.clean = false }
    }

    /// On the session thread, when the loop ends (unmount, signal): no more requests.
    func ended() {
        wipe(ending: true)
    }

    private func wipe(ending: Bool = false) {
        StackWipe.here()
        let waiters = state.withLock { state in
            state.clean = true
            state.ended = state.ended || ending
            state.done = state.requested
            return state.waiters
        }
        pending.store(false, ordering: .relaxed)
        for _ in 0..<waiters { wiped.signal() }
    }

    /// From the locking thread: returns once the session thread's stack holds nothing handled
    /// before this call, or after `seconds` (a request held up, e.g. by a confirmation; the
    /// thread still wipes once it is done with it).
    func waitForWipe(seconds: Int = 2) {
        if let thread = sessionThread.withLock({ $0 }), pthread_equal(thread, pthread_self()) != 0 {
            pending.store(true, ordering: .relaxed)  // cannot wait for ourselves: after this request
            return
        }
        let ticket = state.withLock { state -> UInt64? in
            if state.clean || state.ended { return nil }
            state.requested += 1
            state.waiters += 1
            return state.requested
        }
        guard let ticket else { return }
        defer { state.withLock { $0.waiters -= 1 } }
        pending.store(true, ordering: .relaxed)
        var deadline = timespec()
        clock_gettime(CLOCK_REALTIME, &deadline)
        deadline.tv_sec += seconds
        // A signal meant for an earlier waiter may come first: the ticket decides.
        while state.withLock({ $0.done < ticket }) {
            guard wiped.wait(until: deadline) else { return }
        }
    }
}
