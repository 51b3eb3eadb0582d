import Glibc
import Support
import SystemCalls
import SystemPackage
import VaultCore

/// Checks a mountpoint before anything is mounted on it, so that errors come as one clear line.
package enum Mountpoint {
    package static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") || VaultLocation.isPostgreSQL(path) { return path }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX))
        guard getcwd(&buffer, buffer.count) != nil else { return path }
        let cwd = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return (cwd == "/" ? "" : cwd) + "/" + path
    }

    /// The canonical path of the mountpoint's parent plus its own name; the mountpoint itself
    /// is not resolved, since it may be a live or dead FUSE mount.
    static func canonical(_ path: String) -> String {
        var full = absolute(path)
        while full.count > 1 && full.hasSuffix("/") { full.removeLast() }
        guard let slash = full.lastIndex(of: "/") else { return full }
        let parent = slash == full.startIndex ? "/" : String(full[..<slash])
        let name = String(full[full.index(after: slash)...])
        guard let resolved = realpath(parent, nil) else { return full }
        defer { free(resolved) }
        let parentPath = String(cString: resolved)
        return (parentPath == "/" ? "" : parentPath) + "/" + name
    }

    /// The mountpoint as the mount table will name it: fully resolved when it can be (a live
    /// mount or a symlink to one), else the canonical parent plus the name.
    package static func resolved(_ path: String) -> String {
        guard let resolved = realpath(absolute(path), nil) else { return canonical(path) }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Returns the canonical mountpoint, or throws why it cannot be used.
    static func check(_ path: String) throws(CommandFailure) -> String {
        var canonicalPath = canonical(path)
        var link = stat()
        if lstat(canonicalPath, &link) == 0 && link.st_mode & S_IFMT == S_IFLNK { canonicalPath = resolved(path) }
        var info = stat()
        if stat(canonicalPath, &info) != 0 && Errno.last == .socketNotConnected {
            // A daemon that died (killed) leaves a dead mount behind; clear it and go on.
            if Subprocess.run("fusermount3", ["-u", "-z", canonicalPath]).status == 0 {
                DaemonLog.deadMountCleared(at: canonicalPath)
            }
        }
        guard stat(canonicalPath, &info) == 0 else {
            let error = Errno.last
            let reason = error == .noSuchFileOrDirectory ? "does not exist" : error.description
            throw CommandFailure(message: "mountpoint \(path): \(reason)", status: .mountFailure)
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw CommandFailure(message: "mountpoint \(path) is not a directory", status: .mountFailure)
        }
        guard !MountTable.isMountpoint(canonicalPath) else {
            throw CommandFailure(message: "\(path) is already a mountpoint", status: .mountFailure)
        }
        guard let dir = opendir(canonicalPath) else {
            throw CommandFailure(message: "mountpoint \(path): \(Errno.last)", status: .mountFailure)
        }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if name != "." && name != ".." {
                throw CommandFailure(message: "mountpoint \(path) is not empty", status: .mountFailure)
            }
        }
        return canonicalPath
    }
}
