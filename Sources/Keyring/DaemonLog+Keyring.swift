import DBus
import Glibc
import Support
import VaultCore

/// What the Secret Service tells the system log.
extension DaemonLog.Event {
    package static func secretServiceStarted(uniqueName: String) -> Self {
        Self(LOG_INFO, "serving the Secret Service (org.freedesktop.secrets) on the session bus as \(uniqueName)")
    }

    package static func secretServiceEnded(_ reason: BusConnection.Ended) -> Self {
        switch reason {
        case .stopped: Self(LOG_NOTICE, "the Secret Service stopped")
        case .nameLost: Self(LOG_NOTICE, "the Secret Service stopped: another process took org.freedesktop.secrets (--replace)")
        case .disconnected: Self(LOG_NOTICE, "the Secret Service stopped: the session bus closed the connection")
        }
    }

    package static var unlockPromptWithoutCommand: Self {
        Self(LOG_NOTICE, "an unlock prompt was dismissed: no --extpass command to ask for the passphrase (use keychainfs unlock)")
    }

    /// The errno only: a wrong passphrase says so, nothing else of it is logged.
    package static func unlockPromptFailed(_ error: VaultError) -> Self {
        Self(LOG_NOTICE, "an unlock prompt did not unlock: " + (error == .wrongPassphrase ? "wrong passphrase" : DaemonLog.errnoName(error.errno)))
    }

    package static func defaultCollectionFailed(_ error: VaultError) -> Self {
        Self(LOG_ERR, "cannot make the default collection (login): \(DaemonLog.errnoName(error.errno))")
    }
}

extension DaemonLog {
    package static func secretServiceStarted(uniqueName: String) { record(.secretServiceStarted(uniqueName: uniqueName)) }
    package static func secretServiceEnded(_ reason: BusConnection.Ended) { record(.secretServiceEnded(reason)) }
    package static func unlockPromptWithoutCommand() { record(.unlockPromptWithoutCommand) }
    package static func unlockPromptFailed(_ error: VaultError) { record(.unlockPromptFailed(error)) }
    package static func defaultCollectionFailed(_ error: VaultError) { record(.defaultCollectionFailed(error)) }
}
