import Glibc
import Support
import SystemCalls
import SystemPackage
import VaultCore

/// The directory of `exec --files` (`$KEYCHAINFS_SECRETS_DIR`): made 0700 with mkdtemp in
/// `$XDG_RUNTIME_DIR` (the user's own tmpfs, never on disk), else in /dev/shm; files 0600.
/// When the command ends every regular file below it, including any the command made, is
/// overwritten with zeros before it is removed (a hard link made elsewhere keeps only zeros),
/// then the directory goes.
///
/// Not a mount namespace of the child's own: for a user that needs an unprivileged user
/// namespace, often disabled, and it would change the child's world (setuid programs stop
/// working). So processes of the same user can see the directory, as they can the child's
/// memory and environment in /proc.
final class SecretsDirectory {
    let path: String
    private let descriptor: Int32

    init() throws(CommandFailure) {
        let runtime = getenv("XDG_RUNTIME_DIR").map { String(cString: $0) } ?? ""
        var base = runtime.isEmpty ? "/dev/shm" : runtime
        var info = stat()
        if stat(base, &info) != 0 || info.st_mode & S_IFMT != S_IFDIR { base = "/dev/shm" }
        var template = Array((base + "/keychainfs-exec-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else {
            throw CommandFailure(message: "cannot make a directory for the secrets in \(base): \(Errno.last)",
                                 status: .storage)
        }
        let path = String(cString: made)
        self.path = path
        do {
            descriptor = try SystemCall.retrying { open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        } catch {
            rmdir(path)
            throw CommandFailure(message: "cannot open \(path): \(error)", status: .storage)
        }
    }

    deinit {
        close(descriptor)
    }

    func write(_ name: ItemName, _ bytes: UnsafeRawBufferPointer) throws(CommandFailure) {
        let opened = name.withCString { name, _ in
            Result { () throws(Errno) in
                try SystemCall.retrying { openat(descriptor, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600) }
            }
        }
        let fd: Int32
        switch opened {
        case .success(let opened): fd = opened
        case .failure(let error):
            throw CommandFailure(message: "cannot create a secret's file in \(path): \(error)", status: .storage)
        }
        defer { close(fd) }
        do {
            try FileDescriptor(rawValue: fd).writeFully(bytes)
        } catch {
            throw CommandFailure(message: "cannot write a secret's file in \(path): \(error)", status: .storage)
        }
    }

    /// Wipes and removes everything below the directory, then the directory.
    func wipeAndRemove() {
        SecretsDirectory.wipeEntries(of: descriptor)
        rmdir(path)
    }

    /// Until a pass finds nothing: entries removed while a directory is read may hide others.
    private static func wipeEntries(of directory: Int32) {
        while true {
            let listing = dup(directory)
            guard listing >= 0, let stream = fdopendir(listing) else { return }
            rewinddir(stream)
            var removed = 0
            while let entry = readdir(stream) {
                let done = withUnsafeBytes(of: entry.pointee.d_name) { raw -> Bool in
                    let name = raw.baseAddress!.assumingMemoryBound(to: CChar.self)
                    if strcmp(name, ".") == 0 || strcmp(name, "..") == 0 { return false }
                    wipeAndRemove(name, in: directory)
                    return true
                }
                if done { removed += 1 }
            }
            closedir(stream)
            if removed == 0 { return }
        }
    }

    private static func wipeAndRemove(_ name: UnsafePointer<CChar>, in directory: Int32) {
        var info = stat()
        guard fstatat(directory, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return }
        switch info.st_mode & S_IFMT {
        case S_IFDIR:
            let inner = openat(directory, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if inner >= 0 {
                wipeEntries(of: inner)
                close(inner)
            }
            unlinkat(directory, name, AT_REMOVEDIR)
        case S_IFREG:
            // The command may have made it read-only.
            fchmodat(directory, name, 0o600, 0)
            let fd = openat(directory, name, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)
            if fd >= 0 {
                let zeros = [UInt8](repeating: 0, count: 65536)
                let file = FileDescriptor(rawValue: fd)
                var left = Int(info.st_size)
                while left > 0 {
                    let chunk = min(left, zeros.count)
                    guard (try? zeros.withUnsafeBytes({ try file.writeFully(UnsafeRawBufferPointer(rebasing: $0.prefix(chunk))) })) != nil else { break }
                    left -= chunk
                }
                fsync(fd)
                close(fd)
            }
            unlinkat(directory, name, 0)
        default:
            unlinkat(directory, name, 0)
        }
    }
}
