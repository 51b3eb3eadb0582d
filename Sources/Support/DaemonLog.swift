import Glibc
import Locking
import Synchronization
import SystemCalls
import SystemPackage
import VaultCore

/// What the daemon cannot tell a caller goes to syslog (ident "keychainfs", facility daemon),
/// and with `-f` to standard error as well. Each line names its mountpoint and nothing inside
/// the vault: no item or dictionary name, no secret, no passphrase, because a system log is
/// read by more people, and kept longer, than the vault. Each layer writes its own events'
/// texts beside this file's sink, in `DaemonLog+Layer.swift` (one place per layer, so a layer
/// never names a type above it to describe what happened).
package enum DaemonLog {
    /// One line to log: how urgent, and its text.
    package struct Event: Sendable {
        package let priority: Int32
        package let message: String

        package init(_ priority: Int32, _ message: String) {
            self.priority = priority
            self.message = message
        }
    }

    private struct State {
        package var opened = false
        package var mountpoint: String?
    }

    private static let state = OrderedMutex(.daemonLog, State())
    /// openlog keeps this pointer for the life of the process.
    nonisolated(unsafe) private static let ident = strdup("keychainfs")

    /// From now on every line names `mountpoint`; with `foreground` it goes to stderr too.
    package static func open(mountpoint: String, foreground: Bool) {
        state.withLock { state in
            openlog(ident, LOG_PID | (foreground ? LOG_PERROR : 0), LOG_DAEMON)
            state.opened = true
            state.mountpoint = mountpoint
        }
    }

    package static func helperThreadFailed(errno code: Errno) { record(.helperThreadFailed(errno: code)) }

    /// The line as it is logged, after `keychainfs[PID]: `.
    package static func line(_ event: Event, mountpoint: String) -> String {
        // Control characters in a path would forge or break log lines.
        Terminal.printable(mountpoint) + ": " + event.message
    }

    package static func record(_ event: Event, mountpoint explicit: String? = nil) {
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

    /// An errno as the log names it: its text and its number (an Int32 from the errno table of
    /// `VaultError`, or a system call's `Errno`).
    package static func errnoName(_ code: Int32) -> String {
        errnoName(Errno(rawValue: code))
    }

    package static func errnoName(_ code: Errno) -> String {
        "\(code) (errno \(code.rawValue))"
    }
}

extension DaemonLog.Event {
    package static func helperThreadFailed(errno code: Errno) -> Self {
        Self(LOG_ERR, "cannot start a helper thread (\(DaemonLog.errnoName(code))): the control socket or a lock trigger is not running")
    }
}
