import CSodium
import Glibc
import SystemCalls
import SystemPackage
import TPMSeal

/// This machine's host key: 32 random bytes outside the vault, so a copy of the vault (and its
/// passphrase) taken elsewhere cannot open this-device-only items. Where the machine has a TPM,
/// the key is sealed by it (a sealed data object under its storage root key, kept in
/// `sealedPath`): a copy of that file is useless on any other TPM, and the key is unsealed
/// through an encrypted session into locked memory only. Without a TPM, a file of its own at
/// `path`. Created on first use (0600, its directories 0700).
public enum HostKey {
    static let bytes = 32

    /// `$KEYCHAINFS_HOST_KEY`, else `$XDG_STATE_HOME/keychainfs/host.key`, else
    /// `~/.local/state/keychainfs/host.key`.
    public static var path: String {
        XDGBaseDirectory.environment("KEYCHAINFS_HOST_KEY") ?? XDGBaseDirectory.state.keychainfs + "/host.key"
    }

    /// The TPM's sealed object, beside `path`: `host.tpm` for `host.key`, else `path` + `.tpm`.
    public static var sealedPath: String {
        let path = HostKey.path
        return path.hasSuffix(".key") ? String(path.dropLast(4)) + ".tpm" : path + ".tpm"
    }

    /// Where the key is, or goes on first use: a sealed object already made stays the TPM's and
    /// a key file already made stays the file's (its items were sealed with that key); a first
    /// key goes to the TPM when one answers.
    public static var holder: HostKeyHolder {
        let sealed = HostKey.sealedPath
        if access(sealed, F_OK) == 0 { return .tpm(configuration: reachableTPM()?.configuration, sealedObject: sealed) }
        if access(HostKey.path, F_OK) == 0 { return .file(HostKey.path, tpm: reachableTPM() != nil) }
        if let configuration = reachableTPM()?.configuration { return .tpm(configuration: configuration, sealedObject: sealed) }
        return .file(HostKey.path, tpm: false)
    }

    /// The host key, creating it when there is none yet.
    static func load() throws(VaultError) -> SecureBuffer {
        let path = HostKey.path
        let sealed = HostKey.sealedPath
        if let blob = try readSealed(sealed) { return try unseal(blob, from: sealed) }
        if let key = try read(path) { return key }
        if let (connection, _) = reachableTPM() { return try createSealed(at: sealed, with: connection) }
        try makeDirectories(for: path)
        let key = try newKey()
        // Two first uses at once keep one key, the one linked first (NewFile never replaces).
        do {
            try key.withUnsafeBytes { (bytes) throws(Errno) in try NewFile.create(at: path, contents: bytes) }
        } catch {
            if error == .fileExists, let existing = try read(path) { return existing }
            throw failure(path, "cannot write it: \(error)")
        }
        return key
    }

    private static func newKey() throws(VaultError) -> SecureBuffer {
        var key = try SecureBuffer(capacity: bytes)
        key.withUnsafeMutableStorage { out in
            randombytes_buf(out.baseAddress!, out.count)
            return out.count
        }
        return key
    }

    /// The TPM that `KEYCHAINFS_TCTI` or `/dev/tpmrm0` names, if it answers.
    private static func reachableTPM() -> (connection: TPMConnection, configuration: String)? {
        guard let configuration = TPMConnection.configuration,
              let connection = try? TPMConnection(configuration: configuration) else { return nil }
        return (connection, configuration)
    }

    /// A new key sealed by the TPM; only the sealed object reaches the disk.
    private static func createSealed(at sealed: String, with connection: TPMConnection) throws(VaultError) -> SecureBuffer {
        try makeDirectories(for: sealed)
        let key = try newKey()
        let blob: [UInt8]
        do {
            blob = try key.withUnsafeBytes { (bytes) throws(TPMFailure) in try connection.seal(bytes) }
        } catch {
            throw tpmFailure(sealed, error)
        }
        let written: Errno? = blob.withUnsafeBytes { bytes in
            do throws(Errno) {
                try NewFile.create(at: sealed, contents: bytes)
                return nil
            } catch {
                return error
            }
        }
        if let error = written {
            // Two first uses at once keep one key, the one linked first.
            if error == .fileExists, let existing = try readSealed(sealed) { return try unseal(existing, from: sealed) }
            throw failure(sealed, "cannot write it: \(error)")
        }
        return key
    }

    /// The key in the sealed object `blob`, unsealed by this machine's TPM. Another TPM, or none,
    /// answers as another machine's host key does: `otherDevice`.
    private static func unseal(_ blob: [UInt8], from sealed: String) throws(VaultError) -> SecureBuffer {
        guard let configuration = TPMConnection.configuration else {
            throw .otherDevice("the host key sealed by a TPM in \(sealed) (this machine has none)")
        }
        var key = try SecureBuffer(capacity: bytes)
        do {
            let connection = try TPMConnection(configuration: configuration)
            try key.withUnsafeMutableStorage { (out) throws(TPMFailure) in try connection.unseal(blob, into: out) }
        } catch {
            throw tpmFailure(sealed, error)
        }
        guard key.count == bytes else { throw failure(sealed, "it seals \(key.count) bytes, not \(bytes)") }
        return key
    }

    private static func tpmFailure(_ sealed: String, _ error: TPMFailure) -> VaultError {
        switch error {
        case .unreachable(let configuration):
            .otherDevice("the host key sealed by a TPM in \(sealed) (no TPM answers at \(configuration))")
        case .otherTPM:
            .otherDevice("the host key sealed in \(sealed) (by another TPM than this machine's)")
        case .failed(let reason):
            failure(sealed, "TPM: \(reason)")
        case .full:
            failure(sealed, "TPM: no NV space left")
        case .wrongAuthorization, .lockedOut, .pcrsChanged:
            failure(sealed, "TPM: refused (\(error))")
        }
    }

    /// The sealed object at `path`, or nil when there is none. Not secret: only its TPM opens it.
    private static func readSealed(_ path: String) throws(VaultError) -> [UInt8]? {
        guard let file = try openIfPresent(path) else { return nil }
        defer { _ = try? file.close() }
        do {
            return try file.readToEnd()
        } catch {
            throw failure(path, error.description)
        }
    }

    /// `path` opened for reading, or nil when there is no file; a link is refused.
    private static func openIfPresent(_ path: String) throws(VaultError) -> FileDescriptor? {
        do {
            return try SystemCall.typed { try FileDescriptor.open(path, .readOnly, options: [.closeOnExec, .noFollow]) }
        } catch {
            if error == .noSuchFileOrDirectory { return nil }
            throw failure(path, error.description)
        }
    }

    /// The key at `path`, or nil when there is no file.
    private static func read(_ path: String) throws(VaultError) -> SecureBuffer? {
        guard let file = try openIfPresent(path) else { return nil }
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
