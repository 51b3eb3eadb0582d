import Glibc
import Synchronization
import VaultCore

/// What the daemon cannot tell a caller goes to syslog (ident "keychainfs", facility daemon),
/// and with `-f` to standard error as well. Every text lives here. Each line names its
/// mountpoint and nothing inside the vault: no item or dictionary name, no secret, no
/// passphrase, because a system log is read by more people, and kept longer, than the vault.
enum DaemonLog {
    /// Why a control request was refused. Never what it said: a passphrase typed in the wrong
    /// place would end up in the log.
    enum Refusal: Equatable {
        case peerNotAllowed(uid: uid_t?)
        case unknownRequest
        case malformedUnlock
        case shortPassphrase
        case malformedRead
        case shortPath
        /// A `read` or `list` whose writer the kernel did not name, or whose bytes came from more than one process.
        case unknownWriter
    }

    enum Event {
        case started(vault: String, idleLockSeconds: Int?)
        case stopped
        case lockedWhenIdle(seconds: Int)
        case lockedBySIGUSR1
        case lockedByRotation
        case lockedByLogind(ScreenLockWatcher.Cause)
        case logindUnreachable(String)
        case logindSessionUnknown
        case refused(Refusal)
        case deadMountCleared
        case staleRecordReplaced(deadPID: pid_t)
        case storeFailedAtUnmount(VaultError)
        case helperThreadFailed(errno: Int32)
        case controlSocketStopped(errno: Int32)
        case ptraceUnrestricted(scope: Int?)
        case accessDenied(AccessDenial)
        case confirmation(ConfirmationAnswer, pid: pid_t)
        case accessRulesRefused(VaultError)
        case accessLogWriteFailed(VaultError, entries: Int)
        case syncFailed(VaultError)
        case secretServiceStarted(uniqueName: String)
        case secretServiceEnded(BusConnection.Ended)
        case unlockPromptWithoutCommand
        case unlockPromptFailed(VaultError)
        case defaultCollectionFailed(VaultError)
        case notifyFailed(errno: Int32)
        case storageConnection(StorageConnectionEvent)
        case changeListenerLost(String)
        case changeListenerRestored

        var priority: Int32 {
            switch self {
            case .started, .stopped, .secretServiceStarted: LOG_INFO
            case .secretServiceEnded, .unlockPromptWithoutCommand, .unlockPromptFailed: LOG_NOTICE
            case .defaultCollectionFailed: LOG_ERR
            case .notifyFailed: LOG_ERR
            case .storageConnection(.lost): LOG_ERR
            case .storageConnection(.restored): LOG_NOTICE
            case .changeListenerLost: LOG_WARNING
            case .changeListenerRestored: LOG_NOTICE
            case .lockedByLogind, .logindUnreachable, .logindSessionUnknown: LOG_NOTICE
            case .lockedWhenIdle, .lockedBySIGUSR1, .lockedByRotation, .deadMountCleared, .staleRecordReplaced: LOG_NOTICE
            case .refused, .ptraceUnrestricted, .accessDenied: LOG_WARNING
            case .confirmation: LOG_NOTICE
            case .accessRulesRefused: LOG_ERR
            case .storeFailedAtUnmount, .helperThreadFailed, .controlSocketStopped, .accessLogWriteFailed: LOG_ERR
            case .syncFailed: LOG_ERR
            }
        }

        var message: String {
            switch self {
            case .started(let vault, let idle):
                "mounted vault \(Terminal.printable(vault)); " + (idle.map { "idle lock after \($0) s" } ?? "no idle lock")
            case .stopped:
                "unmounted; keys and plaintext wiped, daemon exiting"
            case .lockedWhenIdle(let seconds):
                "locked after \(seconds) s without access"
            case .lockedBySIGUSR1:
                "locked on SIGUSR1"
            case .lockedByRotation:
                "locked: another process rotated the vault's master key (member remove) and this mount cannot follow "
                    + "(opened with a passphrase whose slot was dropped or rewrapped elsewhere, or its member was removed); unlock to open it again"
            case .lockedByLogind(.sessionLocked):
                "locked: logind locked the session"
            case .lockedByLogind(.lockedHint):
                "locked: the session's screen locked (LockedHint)"
            case .lockedByLogind(.sleep):
                "locked: the machine is about to sleep"
            case .logindUnreachable(let why):
                "--lock-on-screen-lock: cannot follow logind on the system bus (\(why)); the mount goes on without it"
            case .logindSessionUnknown:
                "--lock-on-screen-lock: this process belongs to no logind session and XDG_SESSION_ID is not set; locking only before sleep"
            case .refused(.peerNotAllowed(let uid)):
                "refused a control request from " + (uid.map { "uid \($0)" } ?? "a peer whose uid cannot be read")
                    + ": only the mounting user and root may use the mount's socket"
            case .refused(.unknownRequest):
                "refused a control request: unknown request"
            case .refused(.malformedUnlock):
                "refused a control request: malformed unlock request"
            case .refused(.malformedRead):
                "refused a control request: malformed read or list request"
            case .refused(.shortPath):
                "refused a control request: the read or list request ended before its path, or another process wrote part of it"
            case .refused(.unknownWriter):
                "refused a control request: the kernel did not name one process as the writer of the read or list request"
            case .refused(.shortPassphrase):
                "refused a control request: the unlock request ended before its passphrase"
            case .deadMountCleared:
                "cleared a dead mount left by a daemon that died"
            case .staleRecordReplaced(let pid):
                "replaced the runtime record and control socket left by daemon \(pid), which died"
            case .storeFailedAtUnmount(let error):
                // The errno only: the error's description names the item.
                "a write still open at unmount could not be stored and is lost: \(DaemonLog.errnoName(error.errno))"
            case .syncFailed(let error):
                "cannot make the last namespace changes durable (\(DaemonLog.errnoName(error.errno))); they are committed and are tried again at the next change, fsync or unmount"
            case .helperThreadFailed(let code):
                "cannot start a helper thread (\(DaemonLog.errnoName(code))): the control socket or a lock trigger is not running"
            case .controlSocketStopped(let code):
                "the control socket stopped accepting (\(DaemonLog.errnoName(code))): lock, unlock and status no longer reach this mount"
            case .ptraceUnrestricted(let scope):
                PtraceScope.warning(scope: scope) ?? "kernel.yama.ptrace_scope is \(scope ?? -1)"
            case .accessDenied(let denial):
                // The denial names the process, never the path.
                "refused: \(denial)"
            case .confirmation(let answer, let pid):
                "confirmation for process \(pid): " + DaemonLog.describe(answer)
            case .accessRulesRefused(let error):
                "the access rules cannot be read, so every request is refused until they can: "
                    + (error.errno == EIO ? "a rule record failed authentication or could not be read" : DaemonLog.errnoName(error.errno))
            case .secretServiceStarted(let uniqueName):
                "serving the Secret Service (org.freedesktop.secrets) on the session bus as \(uniqueName)"
            case .secretServiceEnded(.stopped):
                "the Secret Service stopped"
            case .secretServiceEnded(.nameLost):
                "the Secret Service stopped: another process took org.freedesktop.secrets (--replace)"
            case .secretServiceEnded(.disconnected):
                "the Secret Service stopped: the session bus closed the connection"
            case .unlockPromptWithoutCommand:
                "an unlock prompt was dismissed: no --extpass command to ask for the passphrase (use keychainfs unlock)"
            case .unlockPromptFailed(let error):
                // The errno only: a wrong passphrase says so, nothing else of it is logged.
                "an unlock prompt did not unlock: " + (error == .wrongPassphrase ? "wrong passphrase" : DaemonLog.errnoName(error.errno))
            case .defaultCollectionFailed(let error):
                "cannot make the default collection (login): \(DaemonLog.errnoName(error.errno))"
            case .notifyFailed(let code):
                "cannot tell systemd through NOTIFY_SOCKET (\(DaemonLog.errnoName(code))): a Type=notify unit will not see the mount's state"
            case .storageConnection(.lost(let reason)):
                // The reason names the server and libpq's cause, nothing inside the vault.
                "lost the vault's storage (\(Terminal.printable(reason))); calls fail with EIO until a call connects again"
            case .storageConnection(.restored):
                "the vault's storage is reachable again; calls work again"
            case .changeListenerLost(let reason):
                // The storage's message: the server's name (without a password) and libpq's reason.
                "not hearing other mounts' changes (\(reason)); reconnecting. Meanwhile they show once the kernel's "
                    + "cache expires (\(FileSystem.cacheSeconds) s), and to files already open only when opened again"
            case .changeListenerRestored:
                "hearing other mounts' changes again; everything cached was dropped, since changes meanwhile went unheard"
            case .accessLogWriteFailed(let error, let entries):
                // The errno only, as for stores: nothing of an entry reaches the system log.
                "cannot write \(entries) access log entries (\(DaemonLog.errnoName(error.errno))); they are kept and tried again"
            }
        }
    }

    private struct State {
        var opened = false
        var mountpoint: String?
    }

    private static let state = Mutex(State())
    /// openlog keeps this pointer for the life of the process.
    nonisolated(unsafe) private static let ident = strdup("keychainfs")

    /// From now on every line names `mountpoint`; with `foreground` it goes to stderr too.
    static func open(mountpoint: String, foreground: Bool) {
        state.withLock { state in
            openlog(ident, LOG_PID | (foreground ? LOG_PERROR : 0), LOG_DAEMON)
            state.opened = true
            state.mountpoint = mountpoint
        }
    }

    static func started(vault: String, idleLockSeconds: Int?) { record(.started(vault: vault, idleLockSeconds: idleLockSeconds)) }
    static func stopped() { record(.stopped) }
    static func lockedWhenIdle(seconds: Int) { record(.lockedWhenIdle(seconds: seconds)) }
    static func lockedBySIGUSR1() { record(.lockedBySIGUSR1) }
    static func lockedByRotation() { record(.lockedByRotation) }
    static func lockedByLogind(_ cause: ScreenLockWatcher.Cause) { record(.lockedByLogind(cause)) }
    static func logindUnreachable(_ why: String) { record(.logindUnreachable(why)) }
    static func logindSessionUnknown() { record(.logindSessionUnknown) }
    static func refusedControlRequest(_ refusal: Refusal) { record(.refused(refusal)) }
    static func staleRecordReplaced(deadPID: pid_t) { record(.staleRecordReplaced(deadPID: deadPID)) }
    /// For each pending write whose store fails as the mount goes away.
    static func storeFailedAtUnmount(_ error: VaultError) { record(.storeFailedAtUnmount(error)) }
    static func helperThreadFailed(errno code: Int32) { record(.helperThreadFailed(errno: code)) }
    static func controlSocketStopped(errno code: Int32) { record(.controlSocketStopped(errno: code)) }
    /// When access rules apply and ptrace is not restricted enough for them to hold.
    static func accessDenied(_ denial: AccessDenial) { record(.accessDenied(denial)) }
    static func confirmationAnswered(_ answer: ConfirmationAnswer, pid: pid_t) { record(.confirmation(answer, pid: pid)) }
    static func accessRulesRefused(_ error: VaultError) { record(.accessRulesRefused(error)) }
    static func ptraceUnrestricted(scope: Int?) { record(.ptraceUnrestricted(scope: scope)) }

    /// A batch of the access log could not be committed.
    static func accessLogWriteFailed(_ error: VaultError, entries: Int) { record(.accessLogWriteFailed(error, entries: entries)) }
    /// The commit flusher's sync of namespace changes failed.
    static func syncFailed(_ error: VaultError) { record(.syncFailed(error)) }

    static func secretServiceStarted(uniqueName: String) { record(.secretServiceStarted(uniqueName: uniqueName)) }
    static func secretServiceEnded(_ reason: BusConnection.Ended) { record(.secretServiceEnded(reason)) }
    static func unlockPromptWithoutCommand() { record(.unlockPromptWithoutCommand) }
    static func unlockPromptFailed(_ error: VaultError) { record(.unlockPromptFailed(error)) }
    static func defaultCollectionFailed(_ error: VaultError) { record(.defaultCollectionFailed(error)) }
    static func notifyFailed(errno code: Int32) { record(.notifyFailed(errno: code)) }
    static func storageConnection(_ event: StorageConnectionEvent) { record(.storageConnection(event)) }
    static func changeListenerLost(_ reason: String) { record(.changeListenerLost(reason)) }
    static func changeListenerRestored() { record(.changeListenerRestored) }

    /// Clearing a dead mount happens while checking a mountpoint, before any daemon log is
    /// open and also in the command that launches a daemon, so it names its mountpoint itself.
    static func deadMountCleared(at mountpoint: String) { record(.deadMountCleared, mountpoint: mountpoint) }

    /// The line as it is logged, after `keychainfs[PID]: `.
    static func line(_ event: Event, mountpoint: String) -> String {
        Terminal.printable(mountpoint) + ": " + event.message
    }

    private static func record(_ event: Event, mountpoint explicit: String? = nil) {
        let mountpoint = state.withLock { state in
            // Outside a daemon (or before it opened its log) the line goes to the terminal
            // too: that is where whoever is mounting is looking.
            if !state.opened {
                openlog(ident, LOG_PID | LOG_PERROR, LOG_DAEMON)
                state.opened = true
            }
            return explicit ?? state.mountpoint ?? "(no mountpoint yet)"
        }
        line(event, mountpoint: mountpoint).withCString { text in
            withVaList([text]) { vsyslog(event.priority, "%s", $0) }
        }
    }

    /// Control characters in a path would forge or break log lines.
    static func describe(_ answer: ConfirmationAnswer) -> String {
        switch answer {
        case .allowed: "allowed"
        case .refused(let status): "refused (exit status \(status))"
        case .timedOut: "no answer in time, refused"
        case .unavailable(let reason): "refused: " + reason
        }
    }

    static func errnoName(_ code: Int32) -> String {
        String(cString: strerror(code)) + " (errno \(code))"
    }
}
