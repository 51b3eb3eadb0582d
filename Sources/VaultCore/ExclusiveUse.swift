import Glibc

/// An exclusive claim on a vault file (flock), held by the process serving a mount so a
/// second mount of the same vault is refused. The command line does not take it, so it keeps
/// working beside a mount (SQLite's own locks keep them consistent). A vault in PostgreSQL is
/// not claimed: many machines mount it at once, the server keeping them consistent.
public final class ExclusiveUse: Sendable {
    /// -1 for a vault in PostgreSQL.
    private let fd: Int32

    /// Must stay alive as long as the process uses the vault: closing any descriptor of the
    /// file would drop SQLite's POSIX locks, so this one is closed only when released.
    public init(of path: String) throws(VaultError) {
        if VaultLocation.isPostgreSQL(path) {
            fd = -1
            return
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { throw .vaultNotFound(path) }
            throw .storageFailure("\(path): \(String(cString: strerror(errno)))")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            throw .vaultInUse(path)
        }
        self.fd = fd
    }

    deinit { if fd >= 0 { close(fd) } }
}
