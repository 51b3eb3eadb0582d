import Glibc
import SystemPackage

/// Threads the daemon runs beside the session loop (control socket, idle timer, SIGUSR1).
/// They block the signals that end the daemon, so those always reach the loop's thread and
/// interrupt its read of /dev/fuse.
package enum HelperThread {
    private final class Body: Sendable {
        package let run: @Sendable () -> Void
        package init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    /// Whether the thread started (a failure is logged).
    @discardableResult
    package static func start(_ body: @escaping @Sendable () -> Void) -> Bool {
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { context in
            var blocked = sigset_t()
            sigemptyset(&blocked)
            for signal in [SIGINT, SIGTERM, SIGHUP, SIGUSR1] { sigaddset(&blocked, signal) }
            pthread_sigmask(SIG_BLOCK, &blocked, nil)
            Unmanaged<Body>.fromOpaque(context!).takeRetainedValue().run()
            // glibc keeps an ended thread's stack for the next thread, unwiped.
            StackWipe.here()
            return nil
        }, context)
        if rc == 0 {
            pthread_detach(thread)
        } else {
            Unmanaged<Body>.fromOpaque(context).release()
            DaemonLog.helperThreadFailed(errno: Errno(rawValue: rc))
        }
        return rc == 0
    }
}
