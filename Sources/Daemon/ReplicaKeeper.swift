import Dispatch
import Glibc
import Support
import Synchronization
import SystemCalls
import VaultCore

/// Beside a mount (or a Secret Service) of a PostgreSQL vault with an offline replica, on a
/// thread of its own: copies the server's records into the replica after every commit heard
/// of (this vault's own, told by the storage; another session's, told by the ChangeFollower),
/// and while the vault is offline tries the server once a second, outside the vault's mutex,
/// making the vault live again as soon as it answers. Says each change between live and
/// offline in the daemon's log once.
final class ReplicaKeeper: Sendable {
    /// How often an offline vault tries its server.
    static let retrySeconds = 1.0
    /// The least time between two copies: the commits of a burst (a `cp -r`, an editor's
    /// save) cost one copy after them, not one each. What the replica may lag by.
    static let copyIntervalSeconds = 0.25

    private let stopped = Atomic<Bool>(false)
    private let due = DispatchSemaphore(value: 0)
    private let ended = DispatchSemaphore(value: 0)

    private init() {}

    /// nil for a vault without a replica, or when the thread could not start (HelperThread
    /// logs it): the replica then follows only what this process opens and closes.
    static func start(_ vault: Vault) -> ReplicaKeeper? {
        guard let initial = vault.offlineState else { return nil }
        let keeper = ReplicaKeeper()
        vault.observeOfflineReplica { keeper.due.signal() }
        let started = HelperThread.start {
            defer { keeper.ended.signal() }
            var said = initial
            if !initial.isLive { DaemonLog.offlineReplica(initial) }
            var copyDue = true
            var copied = 0.0
            while !keeper.stopped.load(ordering: .acquiring) {
                if copyDue, said.isLive {
                    let wait = copied + copyIntervalSeconds - SystemCall.monotonicSeconds()
                    if wait > 0 {
                        // Commits meanwhile join this copy.
                        _ = keeper.due.wait(timeout: .now() + wait)
                        continue
                    }
                }
                // A copy that failed (a server half restored, say) is tried again at the next tick.
                var failed = false
                if copyDue, said.isLive {
                    copied = SystemCall.monotonicSeconds()
                    do throws(VaultError) {
                        try vault.refreshOfflineReplica()
                    } catch {
                        failed = true
                        if case .rolledBack = error {} else if case .storageUnreachable = error {} else {
                            DaemonLog.offlineReplicaNotCopied(error)
                        }
                    }
                    StackWipe.here()
                }
                copyDue = failed
                if let state = vault.offlineState, !state.isLive, state.serverRolledBack == nil {
                    if vault.reconnectIfOffline() { copyDue = true }
                }
                if let state = vault.offlineState, state.isLive != said.isLive || (state.serverRolledBack == nil) != (said.serverRolledBack == nil) {
                    DaemonLog.offlineReplica(state)
                    said = state
                }
                if keeper.due.wait(timeout: .now() + retrySeconds) == .success { copyDue = true }
            }
        }
        return started ? keeper : nil
    }

    /// Another session committed: the replica is due a copy.
    func changed() { due.signal() }

    /// Ends the thread, waiting for it briefly: a copy or a connection attempt under way finishes first.
    func stop() {
        stopped.store(true, ordering: .releasing)
        due.signal()
        _ = ended.wait(timeout: .now() + .seconds(5))
    }
}
