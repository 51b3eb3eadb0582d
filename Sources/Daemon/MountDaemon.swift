import Admission
import FUSEDriver
import Glibc
import Keyring
import Support
import VaultCore

/// The serving process: opens (or creates) the vault, claims it, mounts, serves, and on the way
/// out wipes every buffer and key, whatever ended the loop.
package enum MountDaemon {
    /// Tells whoever started us that the mount is up, or why it is not: the launcher through a
    /// pipe (`BackgroundLaunch.readyFD`), or the terminal in foreground mode.
    struct ReadyChannel: Sendable {
        let fd: Int32?
        /// In the foreground: nothing on the terminal on success (`--quiet`).
        var quiet = false

        func ready(_ message: String) {
            guard let fd else { return quiet ? () : Terminal.printInfo(message) }
            Terminal.writeAll(fd, "ready " + message + "\n")
            close(fd)
        }

        func fail(_ failure: CommandFailure) {
            guard let fd else { return Terminal.printError(failure.message) }
            Terminal.writeAll(fd, "error \(failure.status.rawValue) " + failure.message.replacingOccurrences(of: "\n", with: " ") + "\n")
            close(fd)
        }
    }

    package static func serve(_ request: MountRequest, passphraseFD: Int32?, readyFD: Int32?) -> Never {
        let channel = ReadyChannel(fd: readyFD, quiet: request.quiet)
        // Before any other thread exists, so that every thread inherits it blocked and only
        // the lock trigger's sigwait ever takes it.
        LockTriggers.blockSIGUSR1()
        // Control clients may hang up early; a write to them must never end the daemon.
        signal(SIGPIPE, SIG_IGN)
        // Launched in the background: leave the launcher's session and terminal behind, and
        // every descriptor it did not mean to pass (a parent waiting on one would never see us exit).
        if let readyFD {
            _ = setsid()
            closeInheritedDescriptors(keeping: [0, 1, 2, readyFD] + (passphraseFD.map { [$0] } ?? []))
            JournalStderr.attach()
        }
        do throws(CommandFailure) {
            try serve(request, passphraseFD: passphraseFD, channel: channel)
            // Below here lie the frames of the session loop and of the wipe at its end.
            StackWipe.here()
            pauseForTestsIfAsked()
            exit(ExitStatus.success.rawValue)
        } catch {
            channel.fail(error)
            exit(error.status.rawValue)
        }
    }

    /// Test-only: KEYCHAINFS_TEST_PAUSE_BEFORE_EXIT=SECONDS keeps the process alive after it has
    /// wiped everything, so a test can read its memory and show nothing is left.
    private static func pauseForTestsIfAsked() {
        guard let value = getenv("KEYCHAINFS_TEST_PAUSE_BEFORE_EXIT").map({ String(cString: $0) }),
              let seconds = UInt32(value), seconds > 0 else { return }
        sleep(min(seconds, 60))
    }

    private static func closeInheritedDescriptors(keeping kept: [Int32]) {
        guard let dir = opendir("/proc/self/fd") else { return }
        var open: [Int32] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
            if let fd = Int32(name) { open.append(fd) }
        }
        let listing = dirfd(dir)
        closedir(dir)
        for fd in open where fd != listing && !kept.contains(fd) { close(fd) }
    }

    private static func serve(_ request: MountRequest, passphraseFD: Int32?, channel: ReadyChannel) throws(CommandFailure) {
        let mountpoint = try Mountpoint.check(request.mountpoint)
        DaemonLog.open(mountpoint: mountpoint, foreground: channel.fd == nil)
        let vaultPath = Mountpoint.absolute(request.vault.location)
        // Every path is absolute now; do not keep the launch directory's filesystem busy.
        _ = chdir("/")
        OfflineReplicas.isEnabled = !request.vault.noOffline
        let creating = try MountRequest.createsVault(at: vaultPath)
        let (vault, claim) = try openClaimed(vaultPath, creating: creating, request: request, passphraseFD: passphraseFD)
        vault.observeStorageConnection { DaemonLog.storageConnection($0) }
        // Before serving: the writer derives the log's public key while the vault is unlocked.
        // The driver records through it (the integrator's hooks) and it flushes at lock.
        let accessLog = try AccessLogWriter.started(vault: vault, bounds: request.accessLog)
        // A URI's password stays out of every message and log line.
        let shown = VaultLocation.displayName(vaultPath)
        let announcement = (creating ? "created vault \(shown); " : "") + "mounted \(shown) at \(mountpoint)"
        let gate = try accessGate(vault, request: request, mountpoint: mountpoint, log: accessLog)
        let flusher = request.syncEveryChange ? nil
            : CommitFlusher(vault: vault, window: request.syncWindowMilliseconds.map { .milliseconds($0) } ?? CommitFlusher.defaultWindow)
        // Without its thread, nothing would bound the window: every change is durable at once.
        // A thread that cannot start is logged by HelperThread, with pthread_create's error.
        if let flusher { _ = flusher.start() }
        let record = RuntimeState.MountRecord(pid: getpid(), mountpoint: mountpoint, vault: vaultPath)
        let fileSystem = FileSystem(vault: vault, gate: gate, flusher: flusher?.isRunning == true ? flusher : nil) {
            RuntimeState.write(record)
            DaemonLog.started(vault: shown, idleLockSeconds: request.idleLockSeconds)
            channel.ready(announcement)
            ServiceManager.notifyReady(status: announcement)
        }
        // Nothing is mounted here (checked), so a record of this mountpoint is one its daemon
        // left when it died; the control server takes over its socket's path.
        if let stale = RuntimeState.read(mountpoint: mountpoint), !ProcessTable.isRunning(stale.pid) {
            DaemonLog.staleRecordReplaced(deadPID: stale.pid)
        }
        let control = try ControlServer(serving: ServedVault(vault: vault, gate: gate, locking: fileSystem, mountCache: fileSystem,
                                                             mountpoint: mountpoint, shownVault: shown,
                                                             idleLockSeconds: request.idleLockSeconds,
                                                             idleSeconds: { fileSystem.secondsSinceActivity },
                                                             transport: { fileSystem.transportInUse.rawValue }),
                                        at: record)
        // Before the mount: a taken name or a missing bus fails the mount with one line.
        let secretService = request.secretService
            ? try SecretServiceHost(vault: vault, locking: fileSystem, gate: gate,
                                    unlockCommand: request.vault.passphraseCommand, mountCache: fileSystem,
                                    replace: request.replaceSecretService)
            : nil
        var served = false
        var follower: ChangeFollower? = nil
        var keeper: ReplicaKeeper? = nil
        defer {
            // The mount is gone (or never came): a mount of the vault may now wait for this end.
            claim.stopServing()
            if served { ServiceManager.notifyStopping() }
            // No notice from elsewhere is followed once the wipe begins.
            follower?.stop()
            keeper?.stop()
            // The bus first: no call is answered once the wipe begins.
            secretService?.stop()
            // Wipe first: the control socket disappearing last tells watchers it is done.
            // An unmount is a last close for every open file; no caller is left to hear of a
            // store that fails then, so the log does.
            // Entries of the last second are committed before the daemon goes, while the keys
            // still resolve their paths.
            accessLog?.stop()
            for failure in fileSystem.forgetEverything() { DaemonLog.storeFailedAtUnmount(failure) }
            fileSystem.groupCommit.stop()
            // Namespace changes of the last window are made durable before the mount goes.
            flusher?.stop()
            RuntimeState.remove(record)
            control.stop()
            // A mount that never came up is reported to the caller instead.
            if served { DaemonLog.stopped() }
            withExtendedLifetime(claim) {}
        }
        control.start()
        gate.startRefreshing()
        if let secretService, !secretService.runInBackground() {
            throw CommandFailure(message: "cannot start the Secret Service's thread", status: .serviceUnavailable)
        }
        keeper = ReplicaKeeper.start(vault)
        if let listener = vault.changeListener() {
            follower = ChangeFollower.start(listener, fileSystem: fileSystem) { [keeper] in
                secretService?.lookNow()
                keeper?.changed()
            }
        }
        // Without its thread each close syncs its own store, as before.
        _ = fileSystem.groupCommit.start()
        LockTriggers.lockOnSIGUSR1(fileSystem)
        if let idle = request.idleLockSeconds { LockTriggers.lockWhenIdle(fileSystem, after: idle) }
        LockTriggers.lockWhenRotatedAway(fileSystem)
        if request.lockOnScreenLock { ScreenLockWatcher.start(fileSystem) }
        do throws(FUSESession.MountFailure) {
            // The vault names the mount (`findmnt -S VAULT`, `umount VAULT`), without a URI's password.
            try FUSESession.serve(fileSystem, at: mountpoint, source: shown, kernelOptions: request.kernelOptions,
                                  busyPollMicroseconds: request.busyPollMicroseconds, transport: request.transport)
            served = true
        } catch {
            throw CommandFailure(message: error.message, status: .mountFailure)
        }
    }

    /// The vault's access rules, read before anything is served: rules that fail
    /// authentication refuse the mount (never fail open).
    static func accessGate(_ vault: Vault, request: MountRequest, mountpoint: String,
                           log: AccessLogWriter?) throws(CommandFailure) -> AccessGate {
        let policy: AccessPolicy
        do throws(VaultError) {
            policy = try vault.accessPolicy()
        } catch {
            throw CommandFailure(error)
        }
        // Rules trust what /proc says a process runs; say when ptrace makes that weak.
        let scope = PtraceScope.current()
        if PtraceScope.warning(scope: scope) != nil { DaemonLog.ptraceUnrestricted(scope: scope) }
        let broker = ConfirmationBroker(command: request.confirmCommand, pathPrefix: mountpoint,
                                        timeout: .seconds(request.confirmTimeoutSeconds),
                                        rememberDuration: .seconds(request.confirmRememberSeconds))
        return AccessGate(vault: vault, policy: policy, broker: broker, log: log)
    }

    /// The vault, unlocked and claimed for this mount. The passphrase is wiped on return.
    static func openClaimed(_ path: String, creating: Bool, request: MountRequest,
                            passphraseFD: Int32?) throws(CommandFailure) -> (Vault, ExclusiveUse) {
        do throws(VaultError) {
            // Claim first when the vault exists, so a second mount fails before the slow KDF.
            let wait = request.remountWaitSeconds
            var claim: ExclusiveUse? = creating ? nil : try ExclusiveUse(of: path, waitingUpTo: wait, mounted: MountTable.servesVault)
            let withPIN = request.vault.opensWithPIN
            if creating && withPIN {
                throw .invalidArgument("\(path): no vault here; a TPM PIN opens an existing vault (`keychainfs init --tpm-pin` makes one)")
            }
            let passphrase: SecureBuffer
            if let passphraseFD {
                passphrase = try SecretInput.passphrase(file: "/proc/self/fd/\(passphraseFD)", command: nil, prompt: "", confirm: false)
                close(passphraseFD)
            } else if withPIN {
                passphrase = try SecretInput.pin(file: request.vault.pinFile, confirm: false)
            } else {
                passphrase = try SecretInput.passphrase(file: request.vault.passphraseFile, command: request.vault.passphraseCommand,
                                                        prompt: creating ? "New passphrase: " : "Passphrase: ", confirm: creating)
            }
            if creating && request.vault.memberKeyPath != nil {
                throw .invalidArgument("\(path): no vault here; a member key opens an existing vault (`keychainfs init` makes one)")
            }
            let vault = if creating {
                try Vault.create(at: path, passphrase: passphrase, kdf: request.kdf.parameters)
            } else if withPIN {
                try Vault.open(at: path, pin: passphrase, acceptingRollback: request.vault.acceptRollback)
            } else if let memberKeyPath = request.vault.memberKeyPath {
                // Unlocks after a lock take this key's passphrase as well (see `Vault.unlock`).
                try Vault.open(at: path, memberKeyAt: memberKeyPath, passphrase: passphrase,
                               acceptingRollback: request.vault.acceptRollback)
            } else {
                try Vault.open(at: path, passphrase: passphrase, acceptingRollback: request.vault.acceptRollback)
            }
            if claim == nil { claim = try ExclusiveUse(of: path, waitingUpTo: wait, mounted: MountTable.servesVault) }
            return (vault, claim!)
        } catch .vaultInUse(let path) {
            throw CommandFailure(message: "\(path): this vault is already mounted", status: .vaultBusy)
        } catch {
            throw CommandFailure(error)
        }
    }
}
