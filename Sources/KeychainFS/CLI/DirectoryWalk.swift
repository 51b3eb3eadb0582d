import Glibc
import Support
import SystemCalls
import SystemPackage
import VaultCore

/// The files and directories under a directory on disk, for `import pass` and `import dir`:
/// each directory before what is in it, names sorted, symbolic links never followed.
enum DirectoryWalk {
    struct Found {
        enum Kind { case file, directory, other }
        let path: String
        /// The names from the top directory down to this one.
        let components: [ItemName]
        let kind: Kind
    }

    /// Everything below `top`; with `skippingHidden`, names starting with '.' are left out
    /// (a pass store's `.git` and `.gpg-id`).
    static func walk(_ top: String, skippingHidden: Bool) throws(VaultError) -> [Found] {
        var info = stat()
        guard stat(top, &info) == 0 else { throw .invalidArgument("\(top): \(Errno.last)") }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw .invalidArgument("\(top): not a directory") }
        var found: [Found] = []
        try walk(top, [], skippingHidden: skippingHidden, into: &found)
        return found
    }

    private static func walk(_ directory: String, _ components: [ItemName], skippingHidden: Bool,
                             into found: inout [Found]) throws(VaultError) {
        guard let handle = opendir(directory) else { throw .invalidArgument("\(directory): \(Errno.last)") }
        var names: [String] = []
        while let entry = readdir(handle) {
            // Refused as the mount refuses it, rather than stored with U+FFFD in its place.
            let decoded = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                let bytes = raw.baseAddress!.assumingMemoryBound(to: CChar.self)
                return (String(validatingCString: bytes), String(cString: bytes))
            }
            guard let name = decoded.0 else {
                closedir(handle)
                throw .invalidArgument("\(directory)/\(Terminal.printable(decoded.1)): \(VaultError.invalidName("a name must be valid UTF-8"))")
            }
            if name == "." || name == ".." || (skippingHidden && name.hasPrefix(".")) { continue }
            names.append(name)
        }
        closedir(handle)
        for name in names.sorted() {
            let path = directory + "/" + name
            let itemName: ItemName
            do { itemName = try ItemName(name) } catch { throw .invalidArgument("\(path): \(error)") }
            var info = stat()
            guard lstat(path, &info) == 0 else { throw .invalidArgument("\(path): \(Errno.last)") }
            switch info.st_mode & S_IFMT {
            case S_IFDIR:
                found.append(Found(path: path, components: components + [itemName], kind: .directory))
                try walk(path, components + [itemName], skippingHidden: skippingHidden, into: &found)
            case S_IFREG:
                found.append(Found(path: path, components: components + [itemName], kind: .file))
            default:
                found.append(Found(path: path, components: components + [itemName], kind: .other))
            }
        }
    }

    /// A file's bytes in locked memory; over `limit` bytes is `.itemTooLarge`.
    static func read(_ path: String, limit: Int) throws(VaultError) -> SecureBuffer {
        let fd: Int32
        do {
            fd = try SystemCall.retrying { open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }
        } catch {
            throw .invalidArgument("\(path): \(error)")
        }
        defer { close(fd) }
        var content = try SecureBuffer(capacity: 0)
        guard try SecretInput.read(fd, into: &content, limit: limit) == .complete else {
            throw .invalidArgument("\(path): larger than the vault's item size limit (\(limit) bytes)")
        }
        return content
    }
}
