import CSodium
import Glibc
import Support
import SystemCalls
import SystemPackage

/// Per-user runtime files of live mounts (`$XDG_RUNTIME_DIR/keychainfs`, `/run/keychainfs`
/// for root), in a 0700 directory: which daemon serves which mountpoint.
package enum RuntimeState {
    static var directory: String {
        if let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), !runtime.isEmpty {
            return runtime + "/keychainfs"
        }
        return getuid() == 0 ? "/run/keychainfs" : "/tmp/keychainfs-\(getuid())"
    }

    package struct MountRecord {
        package let pid: pid_t
        package let mountpoint: String
        package let vault: String
    }

    /// The control socket of the daemon serving `mountpoint`.
    package static func socketPath(for mountpoint: String) -> String { recordPath(for: mountpoint) + ".sock" }

    /// Every mount this user has running, by its record.
    package static func allRecords() -> [MountRecord] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var records: [MountRecord] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
            guard name.hasPrefix("mount-"), !name.contains(".") else { continue }
            if let record = read(path: directory + "/" + name) { records.append(record) }
        }
        return records.sorted { $0.mountpoint < $1.mountpoint }
    }

    static func ensureDirectory() throws(CommandFailure) {
        do {
            try SystemCall.makeDirectoryIfMissing(directory, permissions: .ownerReadWriteExecute)
        } catch {
            throw CommandFailure(message: "cannot create \(directory): \(error)", status: .failure)
        }
        var info = stat()
        guard lstat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == getuid() else {
            throw CommandFailure(message: "\(directory) is not a directory of ours", status: .failure)
        }
        if info.st_mode & 0o077 != 0 { chmod(directory, 0o700) }
    }

    /// A stable file name for a mountpoint.
    private static func recordPath(for mountpoint: String) -> String {
        var digest = [UInt8](repeating: 0, count: 12)
        let bytes = Array(mountpoint.utf8)
        crypto_generichash(&digest, digest.count, bytes, UInt64(bytes.count), nil, 0)
        return directory + "/mount-" + digest.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }

    static func write(_ record: MountRecord) {
        guard (try? ensureDirectory()) != nil else { return }
        let path = recordPath(for: record.mountpoint)
        unlink(path + ".tmp")
        let fd = open(path + ".tmp", O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        Terminal.writeAll(fd, "\(record.pid)\n\(record.mountpoint)\n\(record.vault)\n")
        close(fd)
        Glibc.rename(path + ".tmp", path)
    }

    package static func read(mountpoint: String) -> MountRecord? {
        read(path: recordPath(for: mountpoint))
    }

    private static func read(path: String) -> MountRecord? {
        guard let bytes = try? FileDescriptor.contents(of: path), !bytes.isEmpty else { return nil }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.count >= 3, let pid = pid_t(lines[0]) else { return nil }
        return MountRecord(pid: pid, mountpoint: String(lines[1]), vault: String(lines[2]))
    }

    static func remove(mountpoint: String) {
        unlink(recordPath(for: mountpoint))
    }
}
