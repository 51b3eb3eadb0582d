import CSodium
import Glibc
import SystemCalls
import SystemPackage

/// A member's public key (libsodium `crypto_box`, X25519): what a vault wraps its master key
/// to, and what people pass around to be added to one.
public struct MemberPublicKey: Equatable, Hashable, Sendable, CustomStringConvertible {
    public static let byteCount = Int(crypto_box_publickeybytes())
    public let bytes: [UInt8]

    init?(bytes: [UInt8]) {
        guard bytes.count == MemberPublicKey.byteCount else { return nil }
        self.bytes = bytes
    }

    /// Standard base64 with padding (44 characters), as WireGuard and age print their keys:
    /// short enough to read over a phone and paste into a chat, and one line.
    public init?(base64: String) {
        Sodium.ensureInitialized()
        let text = Array(base64.utf8)
        var decoded = [UInt8](repeating: 0, count: MemberPublicKey.byteCount)
        var length = 0
        let rc = text.withUnsafeBufferPointer { input in
            input.withMemoryRebound(to: CChar.self) { chars in
                sodium_base642bin(&decoded, decoded.count, chars.baseAddress, chars.count, nil, &length, nil,
                                  sodium_base64_VARIANT_ORIGINAL)
            }
        }
        guard rc == 0, length == MemberPublicKey.byteCount else { return nil }
        bytes = decoded
    }

    public var base64: String {
        let size = sodium_base64_encoded_len(bytes.count, sodium_base64_VARIANT_ORIGINAL)
        var out = [CChar](repeating: 0, count: size)
        sodium_bin2base64(&out, size, bytes, bytes.count, sodium_base64_VARIANT_ORIGINAL)
        return String(decoding: out.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    public var description: String { base64 }

    /// A sealed box (`crypto_box_seal`) of `plaintext` that only this key's secret half opens.
    func seal(_ plaintext: UnsafeRawBufferPointer) -> [UInt8] {
        var sealed = [UInt8](repeating: 0, count: plaintext.count + Int(crypto_box_sealbytes()))
        let rc = crypto_box_seal(&sealed, plaintext.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(plaintext.count), bytes)
        precondition(rc == 0, "crypto_box_seal failed")
        return sealed
    }
}

/// A member's key pair, the secret half in locked memory. On disk (`member.key`) the public key
/// is in clear, so `member show` needs no passphrase, and the secret key is sealed with the
/// project's AEAD under an Argon2id key of the member's own passphrase. The associated data
/// names the file's purpose, the public key and the derivation's cost, so a secret key pasted
/// into another member's file, or a file whose cost was edited, fails to open.
public final class MemberKey: Sendable {
    public let publicKey: MemberPublicKey
    let secretKey: SecureBuffer

    private init(publicKey: MemberPublicKey, secretKey: consuming SecureBuffer) {
        self.publicKey = publicKey
        self.secretKey = secretKey
    }

    static let secretKeyBytes = Int(crypto_box_secretkeybytes())
    private static let magic: [UInt8] = Array("KCFSMEMBERKEY".utf8) + [1]
    private static let fileBytes = magic.count + MemberPublicKey.byteCount + 24 + KeyDerivation.saltBytes
        + AEAD.overhead + secretKeyBytes

    /// `$XDG_DATA_HOME/keychainfs/member.key`, else `~/.local/share/keychainfs/member.key`.
    public static var defaultPath: String {
        let env = { (name: String) -> String? in getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } }
        if let data = env("XDG_DATA_HOME") { return data + "/keychainfs/member.key" }
        var home = env("HOME")
        if home == nil, let entry = getpwuid(getuid()) { home = String(cString: entry.pointee.pw_dir) }
        return (home ?? "/") + "/.local/share/keychainfs/member.key"
    }

    /// Makes a key pair and writes it to `path` (0600, missing directories 0700); refuses an
    /// existing file, so a member never loses the key their vaults are wrapped to.
    @discardableResult
    public static func create(at path: String, passphrase: borrowing SecureBuffer, kdf: KDFParameters) throws(VaultError) -> MemberPublicKey {
        guard passphrase.count > 0 else { throw .invalidArgument("the passphrase is empty") }
        Sodium.ensureInitialized()
        var publicBytes = [UInt8](repeating: 0, count: MemberPublicKey.byteCount)
        var secret = try SecureBuffer(capacity: secretKeyBytes)
        secret.withUnsafeMutableStorage { out in
            let rc = crypto_box_keypair(&publicBytes, out.baseAddress!.assumingMemoryBound(to: UInt8.self))
            precondition(rc == 0, "crypto_box_keypair failed")
            return out.count
        }
        guard let publicKey = MemberPublicKey(bytes: publicBytes) else { preconditionFailure("public key length") }
        let salt = randomBytes(KeyDerivation.saltBytes)
        let kek = try KeyDerivation.keyEncryptionKey(passphrase: passphrase, salt: salt, parameters: kdf)
        let sealed = secret.withUnsafeBytes {
            AEAD.seal($0, key: kek, associatedData: associatedData(publicKey, kdf))
        }
        var file = magic + publicKey.bytes
        file.appendLittleEndian(UInt64(bitPattern: kdf.algorithm))
        file.appendLittleEndian(kdf.opsLimit)
        file.appendLittleEndian(kdf.memLimit)
        file += salt + sealed
        try write(file, to: path)
        return publicKey
    }

    /// The public key stored in `path`; no passphrase needed.
    public static func publicKey(at path: String) throws(VaultError) -> MemberPublicKey {
        try parse(read(path), path).publicKey
    }

    /// Unseals the secret key; a wrong passphrase (or a tampered file) is `.wrongPassphrase`.
    public static func open(at path: String, passphrase: borrowing SecureBuffer) throws(VaultError) -> MemberKey {
        let stored = try parse(read(path), path)
        let kek = try KeyDerivation.keyEncryptionKey(passphrase: passphrase, salt: stored.salt, parameters: stored.parameters)
        var secret = try SecureBuffer(capacity: secretKeyBytes)
        guard AEAD.open(stored.sealed, key: kek, associatedData: associatedData(stored.publicKey, stored.parameters), into: &secret),
              secret.count == secretKeyBytes else { throw .wrongPassphrase }
        return MemberKey(publicKey: stored.publicKey, secretKey: secret)
    }

    /// Opens a sealed box (`crypto_box_seal`) addressed to this key into locked memory of
    /// exactly `count` bytes; false when it was not sealed to this key or is not that long.
    func openSealedBox(_ sealed: [UInt8], count: Int, into output: inout SecureBuffer) -> Bool {
        guard sealed.count == count + Int(crypto_box_sealbytes()), output.capacity >= count else { return false }
        var ok = false
        secretKey.withUnsafeBytes { sk in
            output.withUnsafeMutableStorage { out in
                ok = crypto_box_seal_open(out.baseAddress!.assumingMemoryBound(to: UInt8.self), sealed, UInt64(sealed.count),
                                          publicKey.bytes, sk.baseAddress!.assumingMemoryBound(to: UInt8.self)) == 0
                return ok ? count : 0
            }
        }
        return ok
    }

    private static func associatedData(_ publicKey: MemberPublicKey, _ parameters: KDFParameters) -> [UInt8] {
        var ad = magic + Array("secret key".utf8) + publicKey.bytes
        ad.appendLittleEndian(UInt64(bitPattern: parameters.algorithm))
        ad.appendLittleEndian(parameters.opsLimit)
        ad.appendLittleEndian(parameters.memLimit)
        return ad
    }

    private struct StoredFile {
        let publicKey: MemberPublicKey
        let parameters: KDFParameters
        let salt: [UInt8]
        let sealed: [UInt8]
    }

    private static func parse(_ file: [UInt8], _ path: String) throws(VaultError) -> StoredFile {
        guard file.count == fileBytes, Array(file.prefix(magic.count)) == magic else {
            throw .storageFailure("member key \(path): not a keychainfs member key")
        }
        var at = magic.count
        let publicKey = MemberPublicKey(bytes: Array(file[at ..< at + MemberPublicKey.byteCount]))!
        at += MemberPublicKey.byteCount
        func number() -> UInt64 {
            defer { at += 8 }
            return file[at ..< at + 8].reversed().reduce(0) { $0 << 8 | UInt64($1) }
        }
        let algorithm = Int64(bitPattern: number())
        var parameters = KDFParameters(opsLimit: number(), memLimit: number())
        parameters.algorithm = algorithm
        let salt = Array(file[at ..< at + KeyDerivation.saltBytes])
        at += KeyDerivation.saltBytes
        return StoredFile(publicKey: publicKey, parameters: parameters, salt: salt, sealed: Array(file[at...]))
    }

    private static func read(_ path: String) throws(VaultError) -> [UInt8] {
        let file: FileDescriptor
        do {
            file = try SystemCall.typed { try FileDescriptor.open(path, .readOnly, options: [.closeOnExec, .noFollow]) }
        } catch {
            if error == .noSuchFileOrDirectory {
                throw .storageFailure("member key \(path): no such file (make one with `keychainfs member init`)")
            }
            throw failure(path, error.description)
        }
        defer { _ = try? file.close() }
        // One byte more than a key file, to tell a longer file from one.
        var buffer = [UInt8](repeating: 0, count: fileBytes + 1)
        let total: Int
        do {
            total = try SystemCall.typed { try buffer.withUnsafeMutableBytes { try file.readFully(into: $0) } }
        } catch {
            throw failure(path, error.description)
        }
        return Array(buffer.prefix(total))
    }

    private static func write(_ file: [UInt8], to path: String) throws(VaultError) {
        do {
            try SystemCall.makeParentDirectories(of: path, permissions: .ownerReadWriteExecute)
        } catch {
            throw failure(path, "cannot create \(error.directory): \(error.errno)")
        }
        do {
            try SystemCall.typed { try file.withUnsafeBytes { try NewFile.create(at: path, contents: $0) } }
        } catch {
            if error == .fileExists { throw .vaultExists(path) }
            throw failure(path, "cannot write it: \(error)")
        }
    }

    private static func failure(_ path: String, _ reason: String) -> VaultError {
        .storageFailure("member key \(path): \(reason)")
    }
}
