import Glibc
import Synchronization

/// How many times the SIGUSR2 handler ran.
private let interruptions = Atomic<Int>(0)

/// A thread of its own, sent SIGUSR2 on demand: its handler is installed without SA_RESTART,
/// so a blocking call the signal lands in fails with EINTR (or returns short), as any call of
/// the daemon's may when a signal arrives.
final class Interrupter: Sendable {
    private let thread: pthread_t

    private final class Body: @unchecked Sendable {  // handed to the thread once, through pthread_create
        let run: () -> Void
        init(_ run: @escaping () -> Void) { self.run = run }
    }

    init(running body: @escaping @Sendable () -> Void) {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in interruptions.add(1, ordering: .relaxed) }
        sigemptyset(&action.sa_mask)
        action.sa_flags = 0
        sigaction(SIGUSR2, &action, nil)
        var thread = pthread_t()
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        pthread_create(&thread, nil, { context in
            var set = sigset_t()
            sigemptyset(&set)
            sigaddset(&set, SIGUSR2)
            pthread_sigmask(SIG_UNBLOCK, &set, nil)
            Unmanaged<Body>.fromOpaque(context!).takeRetainedValue().run()
            return nil
        }, context)
        self.thread = thread
    }

    static var count: Int { interruptions.load(ordering: .relaxed) }

    func interrupt() { pthread_kill(thread, SIGUSR2) }

    /// Interrupts the thread every 5 ms for `milliseconds`; how many times the handler ran.
    @discardableResult
    func interrupt(forMilliseconds milliseconds: Int) -> Int {
        let before = Interrupter.count
        for _ in 0..<(milliseconds / 5) {
            interrupt()
            usleep(5_000)
        }
        return Interrupter.count - before
    }

    /// Interrupts the thread every 5 ms until `done` (at most 10 s).
    func interrupt(until done: () -> Bool) {
        for _ in 0..<2000 where !done() {
            interrupt()
            usleep(5_000)
        }
    }

    func join() { pthread_join(thread, nil) }
}
