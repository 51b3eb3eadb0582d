import FUSEDriver
import Support
import VaultCore

/// What a mount needs, gathered from the command line or mount(8)'s `-o` words through
/// `MountOption.all`, and handed to the background daemon whole, as JSON on a pipe (never its
/// arguments, which every local user may read). Never a secret: the passphrase has its own pipe.
package struct MountRequest: Codable, Equatable, Sendable {
    /// Which vault, and how to open it.
    package struct VaultSource: Codable, Equatable, Sendable {
        /// A file's path or a PostgreSQL URI (whose password stays off every command line).
        package var location: String
        /// Where the passphrase is read in the foreground; in the background the launcher reads it.
        package var passphraseFile: String? = nil
        /// `--extpass`: the passphrase at mount in the foreground, and at every later unlock.
        package var passphraseCommand: String? = nil
        /// The member key file to open the vault with; nil to open it with a vault passphrase.
        package var memberKeyPath: String? = nil
        package var acceptRollback = false
        /// `--no-offline`: no offline replica of a PostgreSQL vault is kept or read.
        package var noOffline = false
        /// Open with the TPM PIN slot instead of the passphrase: the PIN from `pinFile`, else the
        /// terminal (in the background, the launcher reads it as it reads a passphrase).
        package var opensWithPIN = false
        package var pinFile: String? = nil

        package init(location: String, passphraseFile: String? = nil, passphraseCommand: String? = nil,
                     memberKeyPath: String? = nil, acceptRollback: Bool = false, noOffline: Bool = false, opensWithPIN: Bool = false,
                     pinFile: String? = nil) {
            self.location = location
            self.opensWithPIN = opensWithPIN || pinFile != nil
            self.pinFile = pinFile
            self.passphraseFile = passphraseFile
            self.passphraseCommand = passphraseCommand
            self.memberKeyPath = memberKeyPath
            self.acceptRollback = acceptRollback
            self.noOffline = noOffline
        }
    }

    package var vault: VaultSource
    package var mountpoint: String
    /// Serve from the calling process instead of a daemon of its own (systemd's way).
    package var foreground = false
    package var kdf: KDFPreset = .moderate
    /// Lock after this many seconds without a request; nil for never.
    package var idleLockSeconds: Int? = nil
    /// The `--confirm-with` command (run with `sh -c`); nil: confirm rules refuse.
    package var confirmCommand: String? = nil
    /// How long a confirmation's answer holds for its process and rule.
    package var confirmRememberSeconds: Int = 300
    /// How long a confirmation command may take before it is stopped and the access refused.
    package var confirmTimeoutSeconds: Int = 30
    /// How much access log to keep; either bound at 0 turns logging off.
    package var logDays = AccessLogBounds.defaultDays
    package var logEntries = AccessLogBounds.defaultEntries
    /// Serve the Secret Service on the session bus for as long as the mount lives.
    package var secretService = false
    /// Take org.freedesktop.secrets over from its owner.
    package var replaceSecretService = false
    /// Mount flags from mount(8)'s `-o` that the kernel enforces for us (ro, noexec).
    package var kernelOptions: [String] = []
    /// Lock when logind says the session locked or the machine is about to sleep.
    package var lockOnScreenLock = false
    /// Every change durable before its call returns (`--sync`), mkdir, rmdir, unlink, rename,
    /// chmod and utimens included; by default those are durable within `CommitFlusher`'s window.
    package var syncEveryChange = false
    /// The flusher's window in milliseconds (tests set a long one to see a change not yet synced).
    package var syncWindowMilliseconds: Int? = nil
    /// How long the session loop polls for the next request before it sleeps (`FUSESession`).
    package var busyPollMicroseconds = FUSESession.defaultBusyPollMicroseconds
    /// How requests travel between the kernel and the daemon (`FUSETransport`).
    package var transport = FUSETransport.defaultChoice
    /// How long to wait for the vault's previous daemon, its mount gone, to let go (`ExclusiveUse`).
    package var remountWaitSeconds = MountRequest.defaultRemountWaitSeconds
    /// Nothing on stdout or stderr on success, as mount(8) expects of its helpers.
    package var quiet = false

    package init(vault: VaultSource, mountpoint: String) {
        self.vault = vault
        self.mountpoint = mountpoint
    }

    /// Longer than a daemon takes to store and wipe after its unmount (about 1 s after writes).
    package static let defaultRemountWaitSeconds = 10

    package var accessLog: AccessLogBounds { AccessLogBounds(days: logDays, entries: logEntries) }
}

// The request crosses a pipe as JSON; a preset is its name there, as on the command line.
extension KDFPreset: Codable {}

extension MountRequest {
    /// Whether mounting creates the vault (none there yet); any other unusable vault is an error.
    package static func createsVault(at path: String) throws(CommandFailure) -> Bool {
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
