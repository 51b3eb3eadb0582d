import FUSEDriver
import Glibc
import Support
import SystemPackage
import VaultCore

/// What the daemon's lifecycle tells the system log.
extension DaemonLog {
    /// Why a control request was refused. Never what it said: a passphrase typed in the wrong
    /// place would end up in the log.
    package enum Refusal: Equatable {
        case peerNotAllowed(uid: uid_t?)
        case unknownRequest
        case malformedUnlock
        case shortPassphrase
        case malformedRead
        case shortPath
        case malformedCommand
        case shortPayload
        /// A `read` or `list` whose writer the kernel did not name, or whose bytes came from more than one process.
        case unknownWriter
    }

    package static func started(vault: String, idleLockSeconds: Int?) { record(.started(vault: vault, idleLockSeconds: idleLockSeconds)) }
    package static func stopped() { record(.stopped) }
    package static func lockedWhenIdle(seconds: Int) { record(.lockedWhenIdle(seconds: seconds)) }
    package static func lockedBySIGUSR1() { record(.lockedBySIGUSR1) }
    package static func lockedByRotation() { record(.lockedByRotation) }
    package static func lockedByLogind(_ cause: ScreenLockWatcher.Cause) { record(.lockedByLogind(cause)) }
    package static func logindUnreachable(_ why: String) { record(.logindUnreachable(why)) }
    package static func logindSessionUnknown() { record(.logindSessionUnknown) }
    package static func refusedControlRequest(_ refusal: Refusal) { record(.refused(refusal)) }
    package static func staleRecordReplaced(deadPID: pid_t) { record(.staleRecordReplaced(deadPID: deadPID)) }
    package static func controlSocketStopped(errno code: Errno) { record(.controlSocketStopped(errno: code)) }
    /// When access rules apply and ptrace is not restricted enough for them to hold.
    package static func ptraceUnrestricted(scope: Int?) { record(.ptraceUnrestricted(scope: scope)) }
    package static func notifyFailed(errno code: Errno) { record(.notifyFailed(errno: code)) }
    package static func storageConnection(_ event: StorageConnectionEvent) { record(.storageConnection(event)) }
    package static func changeListenerLost(_ reason: String) { record(.changeListenerLost(reason)) }
    package static func changeListenerRestored() { record(.changeListenerRestored) }
    package static func offlineReplica(_ state: OfflineState) { record(.offlineReplica(state)) }
    package static func offlineReplicaNotCopied(_ error: VaultError) { record(.offlineReplicaNotCopied(error)) }

    /// Clearing a dead mount happens while checking a mountpoint, before any daemon log is
    /// open and also in the command that launches a daemon, so it names its mountpoint itself.
    package static func deadMountCleared(at mountpoint: String) { record(.deadMountCleared, mountpoint: mountpoint) }
}

extension DaemonLog.Event {
    package static func started(vault: String, idleLockSeconds idle: Int?) -> Self {
        Self(LOG_INFO, "mounted vault \(Terminal.printable(vault)); " + (idle.map { "idle lock after \($0) s" } ?? "no idle lock"))
    }

    package static var stopped: Self { Self(LOG_INFO, "unmounted; keys and plaintext wiped, daemon exiting") }

    package static func lockedWhenIdle(seconds: Int) -> Self { Self(LOG_NOTICE, "locked after \(seconds) s without access") }

    package static var lockedBySIGUSR1: Self { Self(LOG_NOTICE, "locked on SIGUSR1") }

    package static var lockedByRotation: Self {
        Self(LOG_NOTICE, "locked: another process rotated the vault's master key (member remove) and this mount cannot follow "
            + "(opened with a passphrase whose slot was dropped or rewrapped elsewhere, or its member was removed); unlock to open it again")
    }

    package static func lockedByLogind(_ cause: ScreenLockWatcher.Cause) -> Self {
        switch cause {
        case .sessionLocked: Self(LOG_NOTICE, "locked: logind locked the session")
        case .lockedHint: Self(LOG_NOTICE, "locked: the session's screen locked (LockedHint)")
        case .sleep: Self(LOG_NOTICE, "locked: the machine is about to sleep")
        }
    }

    package static func logindUnreachable(_ why: String) -> Self {
        Self(LOG_NOTICE, "--lock-on-screen-lock: cannot follow logind on the system bus (\(why)); the mount goes on without it")
    }

    package static var logindSessionUnknown: Self {
        Self(LOG_NOTICE, "--lock-on-screen-lock: this process belongs to no logind session and XDG_SESSION_ID is not set; locking only before sleep")
    }

    package static func refused(_ refusal: DaemonLog.Refusal) -> Self {
        let message = switch refusal {
        case .peerNotAllowed(let uid):
            "refused a control request from " + (uid.map { "uid \($0)" } ?? "a peer whose uid cannot be read")
                + ": only the mounting user and root may use the mount's socket"
        case .unknownRequest: "refused a control request: unknown request"
        case .malformedUnlock: "refused a control request: malformed unlock request"
        case .malformedRead: "refused a control request: malformed read or list request"
        case .shortPath: "refused a control request: the read or list request ended before its path, or another process wrote part of it"
        case .malformedCommand: "refused a control request: malformed command request"
        case .shortPayload: "refused a control request: the command request ended before its payload, or another process wrote part of it"
        case .unknownWriter: "refused a control request: the kernel did not name one process as the writer of the request"
        case .shortPassphrase: "refused a control request: the unlock request ended before its passphrase"
        }
        return Self(LOG_WARNING, message)
    }

    package static var deadMountCleared: Self { Self(LOG_NOTICE, "cleared a dead mount left by a daemon that died") }

    package static func staleRecordReplaced(deadPID pid: pid_t) -> Self {
        Self(LOG_NOTICE, "replaced the runtime record and control socket left by daemon \(pid), which died")
    }

    package static func controlSocketStopped(errno code: Errno) -> Self {
        Self(LOG_ERR, "the control socket stopped accepting (\(DaemonLog.errnoName(code))): lock, unlock and status no longer reach this mount")
    }

    package static func ptraceUnrestricted(scope: Int?) -> Self {
        Self(LOG_WARNING, PtraceScope.warning(scope: scope) ?? "kernel.yama.ptrace_scope is \(scope ?? -1)")
    }

    package static func notifyFailed(errno code: Errno) -> Self {
        Self(LOG_ERR, "cannot tell systemd through NOTIFY_SOCKET (\(DaemonLog.errnoName(code))): a Type=notify unit will not see the mount's state")
    }

    package static func storageConnection(_ event: StorageConnectionEvent) -> Self {
        switch event {
        case .lost(let reason):
            // The reason names the server and libpq's cause, nothing inside the vault.
            Self(LOG_ERR, "lost the vault's storage (\(Terminal.printable(reason))); calls fail with EIO until a call connects again")
        case .restored:
            Self(LOG_NOTICE, "the vault's storage is reachable again; calls work again")
        }
    }

    /// A change between live and offline (`ReplicaKeeper`).
    package static func offlineReplica(_ state: OfflineState) -> Self {
        if let rolledBack = state.serverRolledBack {
            return Self(LOG_ERR, "the server holds generation \(rolledBack.found) of the vault, older than generation \(rolledBack.newest) in "
                + "this machine's replica (an older dump restored?): reads are served from the replica, changes fail with ESTALE; "
                + "remount with -o accept_rollback to take the server's as it is")
        }
        if state.offlineSince != nil {
            return Self(LOG_WARNING, "offline: the server cannot be reached; reads are served from this machine's replica"
                + (state.replicaCopiedAt.map { " (copied \(max(0, Int64(time(nil)) - $0)) s ago)" } ?? "")
                + ", changes fail with EROFS until the server answers again")
        }
        return Self(LOG_NOTICE, "live again: the server answers, the replica is brought up to date")
    }

    /// Why the replica could not be brought to the server's records (tried again at the next commit).
    package static func offlineReplicaNotCopied(_ error: VaultError) -> Self {
        Self(LOG_WARNING, "the offline replica was not brought up to date: \(Terminal.printable(error.description))")
    }

    /// The storage's message: the server's name (without a password) and libpq's reason.
    package static func changeListenerLost(_ reason: String) -> Self {
        Self(LOG_WARNING, "not hearing other mounts' changes (\(reason)); reconnecting. Meanwhile they show once the kernel's "
            + "cache expires (\(FileSystem.cacheSeconds) s), and to files already open only when opened again")
    }

    package static var changeListenerRestored: Self {
        Self(LOG_NOTICE, "hearing other mounts' changes again; everything cached was dropped, since changes meanwhile went unheard")
    }
}
