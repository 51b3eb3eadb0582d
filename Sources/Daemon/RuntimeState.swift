import CSodium
import Glibc
import Support
import SystemCalls
import SystemPackage

/// Per-user runtime files of live daemons (`$XDG_RUNTIME_DIR/keychainfs`, `/run/keychainfs`
/// for root), in a 0700 directory: which daemon serves which mountpoint, or which vault's
/// Secret Service without a mount, and where its control socket is.
package enum RuntimeState {
    static var directory: String {
        if let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), !runtime.isEmpty {
            return runtime + "/keychainfs"
        }
        return getuid() == 0 ? "/run/keychainfs" : "/tmp/keychainfs-\(getuid())"
    }

    package struct MountRecord {
        package let pid: pid_t
        /// Nil for a Secret Service that serves the vault without a mount.
        package let mountpoint: String?
        package let vault: String

        package init(pid: pid_t, mountpoint: String?, vault: String) {
            self.pid = pid
            self.mountpoint = mountpoint
            self.vault = vault
        }

        /// Where its daemon answers `lock`, `unlock`, `status` and the command line's requests.
        package var socketPath: String {
            mountpoint.map(RuntimeState.socketPath(for:)) ?? RuntimeState.recordPath(forServiceOf: vault) + ".sock"
        }
    }

    /// The control socket of the daemon serving `mountpoint`.
    package static func socketPath(for mountpoint: String) -> String { recordPath(for: mountpoint) + ".sock" }

    /// Every daemon this user has running, by its record: mounts sorted by mountpoint, then
    /// Secret Services without a mount.
    package static func allRecords() -> [MountRecord] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var records: [MountRecord] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
            guard name.hasPrefix("mount-") || name.hasPrefix("service-"), !name.contains(".") else { continue }
            if let record = read(path: directory + "/" + name) { records.append(record) }
        }
        return records.sorted { ($0.mountpoint ?? "\u{10FFFF}", $0.vault) < ($1.mountpoint ?? "\u{10FFFF}", $1.vault) }
    }

    /// The live daemon serving the vault at `vaultPath` (absolute): its mount when it has one,
    /// else its Secret Service.
    package static func daemon(serving vaultPath: String) -> MountRecord? {
        allRecords().first { $0.vault == vaultPath && ProcessTable.isRunning($0.pid) }
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
    private static func recordPath(for mountpoint: String) -> String { directory + "/mount-" + digest(mountpoint) }

    /// A stable file name for the Secret Service of the vault at `vault` (absolute).
    private static func recordPath(forServiceOf vault: String) -> String { directory + "/service-" + digest(vault) }

    private static func digest(_ text: String) -> String {
        var digest = [UInt8](repeating: 0, count: 12)
        let bytes = Array(text.utf8)
        crypto_generichash(&digest, digest.count, bytes, UInt64(bytes.count), nil, 0)
        return digest.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }

    static func write(_ record: MountRecord) {
        guard (try? ensureDirectory()) != nil else { return }
        let path = record.mountpoint.map(recordPath(for:)) ?? recordPath(forServiceOf: record.vault)
        unlink(path + ".tmp")
        let fd = open(path + ".tmp", O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        Terminal.writeAll(fd, "\(record.pid)\n\(record.mountpoint ?? "")\n\(record.vault)\n")
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
        return MountRecord(pid: pid, mountpoint: lines[1].isEmpty ? nil : String(lines[1]), vault: String(lines[2]))
    }

    static func remove(_ record: MountRecord) {
        unlink(record.mountpoint.map(recordPath(for:)) ?? recordPath(forServiceOf: record.vault))
    }
}
