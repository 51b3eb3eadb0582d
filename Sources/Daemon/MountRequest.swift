import FUSEDriver
import Support
import VaultCore

/// What a mount needs, gathered from the command line or mount(8)'s `-o` words through
/// `MountOption.all`, and handed to the background daemon whole, as JSON on a pipe (never its
/// arguments, which every local user may read). Never a secret: the passphrase has its own pipe.
struct MountRequest: Codable, Equatable, Sendable {
    /// Which vault, and how to open it.
    struct VaultSource: Codable, Equatable, Sendable {
        /// A file's path or a PostgreSQL URI (whose password stays off every command line).
        var location: String
        /// Where the passphrase is read in the foreground; in the background the launcher reads it.
        var passphraseFile: String? = nil
        /// `--extpass`: the passphrase at mount in the foreground, and at every later unlock.
        var passphraseCommand: String? = nil
        /// The member key file to open the vault with; nil to open it with a vault passphrase.
        var memberKeyPath: String? = nil
        var acceptRollback = false
    }

    var vault: VaultSource
    var mountpoint: String
    /// Serve from the calling process instead of a daemon of its own (systemd's way).
    var foreground = false
    var kdf: KDFPreset = .moderate
    /// Lock after this many seconds without a request; nil for never.
    var idleLockSeconds: Int? = nil
    /// The `--confirm-with` command (run with `sh -c`); nil: confirm rules refuse.
    var confirmCommand: String? = nil
    /// How long a confirmation's answer holds for its process and rule.
    var confirmRememberSeconds: Int = 300
    /// How long a confirmation command may take before it is stopped and the access refused.
    var confirmTimeoutSeconds: Int = 30
    /// How much access log to keep; either bound at 0 turns logging off.
    var logDays = AccessLogBounds.defaultDays
    var logEntries = AccessLogBounds.defaultEntries
    /// Serve the Secret Service on the session bus for as long as the mount lives.
    var secretService = false
    /// Take org.freedesktop.secrets over from its owner.
    var replaceSecretService = false
    /// Mount flags from mount(8)'s `-o` that the kernel enforces for us (ro, noexec).
    var kernelOptions: [String] = []
    /// Lock when logind says the session locked or the machine is about to sleep.
    var lockOnScreenLock = false
    /// Every change durable before its call returns (`--sync`), mkdir, rmdir, unlink, rename,
    /// chmod and utimens included; by default those are durable within `CommitFlusher`'s window.
    var syncEveryChange = false
    /// The flusher's window in milliseconds (tests set a long one to see a change not yet synced).
    var syncWindowMilliseconds: Int? = nil
    /// How long the session loop polls for the next request before it sleeps (`FUSESession`).
    var busyPollMicroseconds = FUSESession.defaultBusyPollMicroseconds
    /// How long to wait for the vault's previous daemon, its mount gone, to let go (`ExclusiveUse`).
    var remountWaitSeconds = MountRequest.defaultRemountWaitSeconds
    /// Nothing on stdout or stderr on success, as mount(8) expects of its helpers.
    var quiet = false

    /// Longer than a daemon takes to store and wipe after its unmount (about 1 s after writes).
    static let defaultRemountWaitSeconds = 10

    var accessLog: AccessLogBounds { AccessLogBounds(days: logDays, entries: logEntries) }
}

// The request crosses a pipe as JSON; a preset is its name there, as on the command line.
extension KDFPreset: Codable {}

extension MountRequest {
    /// Whether mounting creates the vault (none there yet); any other unusable vault is an error.
    static func createsVault(at path: String) throws(CommandFailure) -> Bool {
        do throws(VaultError) {
            try Vault.checkOpenable(at: path)
            return false
        } catch .vaultNotFound {
            return true
        } catch {
            throw CommandFailure(error)
        }
    }
}
