import FUSEDriver
import Support
import VaultCore

/// What a mount needs, gathered by the command line.
struct MountRequest {
    let vault: VaultOptions
    let mountpoint: String
    let kdf: KDFPreset
    /// Lock after this many seconds without a request; nil for never.
    let idleLockSeconds: Int?
    /// The `--confirm-with` command (run with `sh -c`); nil: confirm rules refuse.
    var confirmCommand: String? = nil
    /// How long a confirmation's answer holds for its process and rule.
    var confirmRememberSeconds: Int = 300
    /// How long a confirmation command may take before it is stopped and the access refused.
    var confirmTimeoutSeconds: Int = 30
    /// How much access log to keep; either bound at 0 turns logging off.
    var accessLog: AccessLogBounds = .default
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
}

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
