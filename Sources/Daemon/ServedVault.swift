import Admission
import Keyring
import VaultCore

/// What a control socket serves: the vault of a mount (its file system locks, caches and
/// counts idle time) or of a Secret Service without a mount. Either way the same rules judge
/// every request, and one lock state is shared with the other ways in.
struct ServedVault: Sendable {
    let vault: Vault
    let gate: AccessGate
    let locking: any LockControl
    /// What the kernel caches of the mount, dropped when a request changes the vault, so the
    /// mount shows the change at once; nil without a mount.
    let mountCache: (any MountCache)?
    /// Nil for a Secret Service without a mount.
    let mountpoint: String?
    /// The vault as messages name it (a URI without its password).
    let shownVault: String
    let idleLockSeconds: Int?
    /// Seconds since a client last used a secret (0 where nothing counts them).
    let idleSeconds: @Sendable () -> Int64
    /// How the kernel's requests reach the mount now; nil without a mount.
    var transport: @Sendable () -> String? = { nil }
}
