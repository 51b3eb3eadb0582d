import CSodium
import Glibc
import Synchronization

/// Whether this process keeps offline replicas of the PostgreSQL vaults it opens, and where
/// they are: `$XDG_CACHE_HOME/keychainfs/replicas/` (else `~/.cache/...`), one SQLite vault
/// file per vault location (0600, directories 0700), named by a hash of the location without
/// its password, so the file name tells nothing of the server. One setting per process: a
/// command or a daemon serves one vault, and `--no-offline` is read once at its start. Off
/// until the command line or a daemon turns it on: a program using VaultCore otherwise (the
/// tests in process) reaches its server alone.
public enum OfflineReplicas {
    private static let disabled = Atomic<Bool>(true)

    /// Set by the command line and the daemons: on unless `--no-offline` (`-o no_offline`).
    public static var isEnabled: Bool {
        get { !disabled.load(ordering: .acquiring) }
        set { disabled.store(!newValue, ordering: .releasing) }
    }

    public static var directory: String { XDGBaseDirectory.cache.keychainfs + "/replicas" }

    /// The replica of the vault shown as `location` (a URI without its password, with `#name`).
    public static func path(of location: String) -> String {
        let message = Array(location.utf8)
        var digest = [UInt8](repeating: 0, count: 16)
        precondition(crypto_generichash(&digest, 16, message, UInt64(message.count), nil, 0) == 0, "crypto_generichash failed")
        return directory + "/" + digest.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
            + ".vault"
    }
}
