import CSodium
import Glibc
import SystemCalls
import SystemPackage

/// This machine's host key: 32 random bytes in a file of its own, outside the vault, so a copy
/// of the vault (and its passphrase) taken elsewhere cannot open this-device-only items.
/// Created on first use (0600, its directories 0700); read straight into locked memory.
public enum HostKey {
    static let bytes = 32

    /// `$KEYCHAINFS_HOST_KEY`, else `$XDG_STATE_HOME/keychainfs/host.key`, else
    /// `~/.local/state/keychainfs/host.key`.
    public static var path: String {
        let env = { (name: String) -> String? in getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } }
        if let explicit = env("KEYCHAINFS_HOST_KEY") { return explicit }
        if let state = env("XDG_STATE_HOME") { return state + "/keychainfs/host.key" }
        var home = env("HOME")
        if home == nil, let entry = getpwuid(getuid()) { home = String(cString: entry.pointee.pw_dir) }
        return (home ?? "/") + "/.local/state/keychainfs/host.key"
    }

    /// The host key, creating it when there is none yet.
    static func load() throws(VaultError) -> SecureBuffer {
        let path = HostKey.path
        if let key = try read(path) { return key }
        try makeDirectories(for: path)
        var key = try SecureBuffer(capacity: bytes)
        key.withUnsafeMutableStorage { out in
            randombytes_buf(out.baseAddress!, out.count)
            return out.count
        }
        // Two first uses at once keep one key, the one linked first (NewFile never replaces).
        do {
            try key.withUnsafeBytes { (bytes) throws(Errno) in try NewFile.create(at: path, contents: bytes) }
        } catch {
            if error == .fileExists, let existing = try read(path) { return existing }
            throw failure(path, "cannot write it: \(error)")
        }
        return key
    }

    /// The key at `path`, or nil when there is no file.
    private static func read(_ path: String) throws(VaultError) -> SecureBuffer? {
        let file: FileDescriptor
        do {
            file = try SystemCall.typed { try FileDescriptor.open(path, .readOnly, options: [.closeOnExec, .noFollow]) }
        } catch {
            if error == .noSuchFileOrDirectory { return nil }
            throw failure(path, error.description)
        }
        defer { _ = try? file.close() }
        // One byte more than a key, to tell a longer file from a key.
        var key = try SecureBuffer(capacity: bytes + 1)
        do {
            try key.withUnsafeMutableStorage { (storage) throws(Errno) in try file.readFully(into: storage) }
        } catch {
            throw failure(path, error.description)
        }
        guard key.count == bytes else { throw failure(path, "it holds \(key.count > bytes ? "more" : "fewer") than \(bytes) bytes") }
        return key
    }

    private static func makeDirectories(for path: String) throws(VaultError) {
        do {
            try SystemCall.makeParentDirectories(of: path, permissions: .ownerReadWriteExecute)
        } catch {
            throw failure(path, "cannot create \(error.directory): \(error.errno)")
        }
    }

    private static func failure(_ path: String, _ reason: String) -> VaultError {
        .storageFailure("host key \(path): \(reason)")
    }
}
