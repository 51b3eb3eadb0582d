import CLinux
import Glibc
import SystemCalls

/// An exclusive claim on a vault file (flock), held by the process serving a mount so a
/// second mount of the same vault is refused. The command line does not take it, so it keeps
/// working beside a mount (SQLite's own locks keep them consistent). A vault in PostgreSQL is
/// not claimed: many machines mount it at once, the server keeping them consistent.
///
/// The claim outlives the mount: after `umount` the daemon still stores and wipes, and only
/// then lets go. So that a mount right after an unmount can wait for that instead of failing,
/// the holder also says whether it is serving (or about to) with an open-file-description read
/// lock on one byte far beyond those SQLite locks, which it drops once its mount is gone
/// (`stopServing`). OFD locks belong to this descriptor alone, so SQLite closing its own
/// descriptors of the file cannot drop it, and any user who can open the vault can ask for it.
public final class ExclusiveUse: Sendable {
    /// -1 for a vault in PostgreSQL.
    private let fd: Int32

    /// SQLite locks bytes from 0x40000000 (1 GiB) on, 512 of them; this one is far past them.
    private static let servingByte: off_t = 1 << 62

    /// Must stay alive as long as the process uses the vault: closing any descriptor of the
    /// file would drop SQLite's POSIX locks, so this one is closed only when released.
    /// `waitingUpTo`: how many seconds to wait for a holder that no longer serves a mount (a
    /// daemon finishing after its unmount); a holder that serves one is refused at once.
    /// `mounted`: whether the mount table shows a mount of the file with this device and inode.
    /// `umount` returns before the daemon has read that its mount is gone, so a holder still
    /// saying it serves is believed only while its mount is there; otherwise it is one about
    /// to say it no longer does (or still starting, or serving in another mount namespace),
    /// and is waited for too.
    public init(of path: String, waitingUpTo seconds: Int = 0,
                mounted: (_ device: UInt64, _ inode: UInt64) -> Bool = { _, _ in true }) throws(VaultError) {
        if VaultLocation.isPostgreSQL(path) {
            fd = -1
            return
        }
        let fd: Int32
        do {
            fd = try SystemCall.retrying { open(path, O_RDONLY | O_CLOEXEC) }
        } catch .noSuchFileOrDirectory {
            throw .vaultNotFound(path)
        } catch {
            throw .storageFailure("\(path): \(error)")
        }
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        deadline.tv_sec += seconds
        var file = stat()
        _ = fstat(fd, &file)
        while true {
            do {
                try SystemCall.retrying { flock(fd, LOCK_EX | LOCK_NB) }
                break
            } catch {
                // Asked each time: a holder that had just claimed, or just mounted, may have since.
                guard error == .wouldBlock, seconds > 0, !Self.passed(deadline),
                      !(Self.serving(fd) && mounted(UInt64(file.st_dev), UInt64(file.st_ino))) else {
                    close(fd)
                    throw .vaultInUse(path)
                }
            }
            usleep(10_000)
        }
        var serving = Self.servingLock(F_RDLCK)
        // Where the file system has no OFD locks, this mount looks like one that is ending: a
        // mount after it waits out its bound before it is refused, as it would be at once.
        _ = fcntl(fd, F_OFD_SETLK, &serving)
        self.fd = fd
    }

    /// The mount is gone; what is left is storing and wiping, which a new mount may wait for.
    public func stopServing() {
        guard fd >= 0 else { return }
        var unlock = Self.servingLock(F_UNLCK)
        _ = fcntl(fd, F_OFD_SETLK, &unlock)
    }

    deinit { if fd >= 0 { close(fd) } }

    /// Whether the claim's holder says it serves; when that cannot be asked, it does.
    private static func serving(_ fd: Int32) -> Bool {
        var probe = servingLock(F_WRLCK)
        guard fcntl(fd, F_OFD_GETLK, &probe) == 0 else { return true }
        return probe.l_type != Int16(F_UNLCK)
    }

    private static func servingLock(_ type: Int32) -> flock {
        var lock = flock()
        lock.l_type = Int16(type)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = servingByte
        lock.l_len = 1
        return lock
    }

    private static func passed(_ deadline: timespec) -> Bool {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return now.tv_sec > deadline.tv_sec || (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec)
    }
}
