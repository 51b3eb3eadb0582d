import Dispatch
import FUSEDriver
import Support
import Synchronization
import VaultCore

/// Beside a mount of a vault in PostgreSQL, on a thread of its own: listens for what other
/// mounts, machines and commands commit (VaultChangeListener, a connection of its own) and
/// makes this mount show it at once (FileSystem.followRemoteChange), and tells the Secret
/// Service in this process to look now rather than at its next quarter-second tick. A lost
/// connection is logged once, retried with backoff by the listener, and logged again once
/// back, when everything is treated as changed: what was committed meanwhile went unheard.
final class ChangeFollower: Sendable {
    /// How long one wait lasts: the longest a stop waits for the thread to see it.
    static let waitSeconds = 0.25

    private let stopped = Atomic<Bool>(false)
    private let ended = DispatchSemaphore(value: 0)

    private init() {}

    /// nil when the thread could not start (HelperThread logs it); the mount goes on, its
    /// caches expiring after `FileSystem.cacheSeconds` as for any other change.
    static func start(_ listener: VaultChangeListener, fileSystem: FileSystem,
                      onChange: @escaping @Sendable () -> Void) -> ChangeFollower? {
        let follower = ChangeFollower()
        let started = HelperThread.start {
            defer { follower.ended.signal() }
            while !follower.stopped.load(ordering: .acquiring) {
                switch listener.next(timeout: waitSeconds) {
                case nil:
                    continue
                case .changed(let change):
                    fileSystem.followRemoteChange(change)
                    onChange()
                    StackWipe.here()  // the changed names were decrypted on this thread
                case .lost(let reason):
                    DaemonLog.changeListenerLost(reason)
                case .restored:
                    DaemonLog.changeListenerRestored()
                    fileSystem.followRemoteChange(.everything)
                    onChange()
                    StackWipe.here()
                }
            }
        }
        return started ? follower : nil
    }

    /// Ends the thread (and with it the listener's connection), waiting for it briefly: a
    /// connection attempt under way finishes first.
    func stop() {
        stopped.store(true, ordering: .releasing)
        _ = ended.wait(timeout: .now() + .seconds(5))
    }
}
