import Admission
import Glibc
import Keyring
import Support
import VaultCore

/// `keychainfs secret-service`: the Secret Service without a mount, in the foreground (as
/// D-Bus activation and systemd run it). Claims the vault as a mount would, so the two never
/// serve one vault from two processes; SIGTERM, SIGINT or SIGHUP end it, and the keys and the
/// log's last entries are dealt with as at unmount.
package enum SecretServiceDaemon {
    package static func serve(_ request: MountRequest) throws(CommandFailure) {
        // Before any thread exists, so that only the waiter below ever takes them.
        var ending = sigset_t()
        sigemptyset(&ending)
        for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&ending, signal) }
        pthread_sigmask(SIG_BLOCK, &ending, nil)
        signal(SIGPIPE, SIG_IGN)

        let vaultPath = Mountpoint.absolute(request.vault.location)
        let shown = VaultLocation.displayName(vaultPath)
        DaemonLog.open(mountpoint: "secret service of " + shown, foreground: true)
        OfflineReplicas.isEnabled = !request.vault.noOffline
        let creating = try MountRequest.createsVault(at: vaultPath)
        let (vault, claim) = try MountDaemon.openClaimed(vaultPath, creating: creating, request: request, passphraseFD: nil)
        defer {
            vault.lock(keepingAfterFirstUnlock: false)
            withExtendedLifetime(claim) {}
        }
        let accessLog = try AccessLogWriter.started(vault: vault, bounds: request.accessLog)
        defer { accessLog?.stop() }
        let gate = try MountDaemon.accessGate(vault, request: request, mountpoint: "", log: accessLog)
        let locking = VaultLock(vault: vault, gate: gate)
        let host = try SecretServiceHost(vault: vault, locking: locking, gate: gate,
                                         unlockCommand: request.vault.passphraseCommand, mountCache: nil,
                                         replace: request.replaceSecretService)
        // The command line reaches this vault through the control socket, as it reaches a mount's.
        // Without it (a runtime directory too long for a socket's path, or not ours) the bus
        // is still served, and the command line asks for the passphrase: one line says so.
        let record = RuntimeState.MountRecord(pid: getpid(), mountpoint: nil, vault: vaultPath)
        var control: ControlServer? = nil
        do throws(CommandFailure) {
            control = try ControlServer(serving: ServedVault(vault: vault, gate: gate, locking: locking, mountCache: nil,
                                                             mountpoint: nil, shownVault: shown, idleLockSeconds: nil,
                                                             idleSeconds: { 0 }),
                                        at: record)
        } catch {
            Terminal.printError("no control socket, so the command line cannot reach this service: " + error.message)
        }
        defer {
            if let control {
                RuntimeState.remove(record)
                control.stop()
            }
        }
        if let control {
            control.start()
            RuntimeState.write(record)
        }
        gate.startRefreshing()
        let keeper = ReplicaKeeper.start(vault)
        defer { keeper?.stop() }
        let waitedFor = ending
        HelperThread.start {
            var signals = waitedFor
            var received: Int32 = 0
            while sigwait(&signals, &received) != 0 {}
            host.stop()
        }
        Terminal.printInfo((creating ? "created vault \(shown); " : "") + "serving org.freedesktop.secrets for \(shown)")
        host.run()
    }
}
