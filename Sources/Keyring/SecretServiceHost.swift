import Admission
import DBus
import Dispatch
import Support
import VaultCore

/// The Secret Service's bus connection and loop: beside a mount on a thread of its own, or
/// alone on the calling thread. The connection is made and the name claimed before anything
/// is served, so a missing bus or a taken name fails the command with one line.
package final class SecretServiceHost: Sendable {
    /// The well-known name the service owns on the session bus.
    package static let busName = SecretService.busName
    private let bus: BusConnection
    private let service: SecretService
    private let ended = DispatchSemaphore(value: 0)

    package init(vault: Vault, locking: any LockControl, gate: AccessGate, unlockCommand: String?, mountCache: (any MountCache)?,
         replace: Bool) throws(CommandFailure) {
        do throws(BusError) {
            bus = try BusConnection.session()
            let service = SecretService(bus: bus, vault: vault, locking: locking, gate: gate, unlockCommand: unlockCommand,
                                        mountCache: mountCache)
            self.service = service
            try bus.serve(prefix: SecretObject.root) { call in service.handle(call) }
            bus.onPeerVanished = { name in service.peerVanished(name) }
            try bus.requestName(SecretService.busName, replace: replace)
            // Here, before the loop's thread exists and before the mount reports ready: what
            // the vault holds (the default collection first) is read while it is unlocked,
            // whatever locks it a moment later.
            service.start()
        } catch {
            throw CommandFailure(message: error.message, status: .serviceUnavailable)
        }
    }

    /// Serves until stop(), the name is taken over, or the bus goes away.
    @discardableResult
    package func run() -> BusConnection.Ended {
        defer { ended.signal() }
        DaemonLog.secretServiceStarted(uniqueName: bus.uniqueName)
        let reason = bus.run(tickInterval: .milliseconds(250)) { service.tick() }
        DaemonLog.secretServiceEnded(reason)
        return reason
    }

    /// Beside a mount: the mount goes on if the service ends (its end is logged).
    package func runInBackground() -> Bool {
        HelperThread.start { [self] in run() }
    }

    /// From any thread: compares what the vault holds with what was announced now, rather
    /// than at the next tick (another machine committed something).
    package func lookNow() {
        bus.post { [service] in service.tick() }
    }

    /// Ends the loop and waits (briefly) for it: a call being answered finishes first.
    package func stop() {
        bus.stop()
        _ = ended.wait(timeout: .now() + .seconds(2))
    }
}
