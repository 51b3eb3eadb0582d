import Glibc
import Support
import VaultCore

/// What the driver tells the system log: the errno only, since an error's description names the item.
extension DaemonLog.Event {
    package static func storeFailedAtUnmount(_ error: VaultError) -> Self {
        Self(LOG_ERR, "a write still open at unmount could not be stored and is lost: \(DaemonLog.errnoName(error.errno))")
    }

    package static func syncFailed(_ error: VaultError) -> Self {
        Self(LOG_ERR, "cannot make the last namespace changes durable (\(DaemonLog.errnoName(error.errno))); they are committed and are tried again at the next change, fsync or unmount")
    }
}

extension DaemonLog {
    /// For each pending write whose store fails as the mount goes away.
    package static func storeFailedAtUnmount(_ error: VaultError) { record(.storeFailedAtUnmount(error)) }
    /// The commit flusher's sync of namespace changes failed.
    package static func syncFailed(_ error: VaultError) { record(.syncFailed(error)) }
}
