import VaultStorageKit
import Glibc
import SystemCalls
import SystemPackage

/// The few filesystem steps around an SQLite vault file that SQLite does not do itself.
package enum VaultFiles {
    /// `mkdir -p` of the vault's directory; directories it creates are 0700.
    static func createParentDirectories(of path: String) throws(VaultError) {
        do {
            try SystemCall.makeParentDirectories(of: path, permissions: .ownerReadWriteExecute)
        } catch {
            throw .storageFailure("cannot create \(error.directory): \(error.errno)")
        }
    }

    /// Creates the vault file 0600, failing if anything already exists there.
    static func createEmptyPrivateFile(_ path: String) throws(VaultError) {
        let fd: Int32
        do {
            fd = try SystemCall.retrying { open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600) }
        } catch .fileExists {
            throw .vaultExists(path)
        } catch {
            throw .storageFailure("cannot create \(path): \(error)")
        }
        fchmod(fd, 0o600)  // the umask may have narrowed it further; never wider
        close(fd)
    }

    /// Makes the new file's directory entry durable too.
    static func syncDirectory(containing path: String) throws(VaultError) {
        let directory = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        let fd = open(directory.isEmpty ? "/" : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        do {
            try FileDescriptor(rawValue: fd).sync()
        } catch .noSpace {
            throw .diskFull
        } catch {
            // Some file systems cannot sync a directory (EINVAL); the file itself is synced.
        }
    }

    package static func removeVaultFiles(_ path: String) {
        for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) }
    }
}
