import CSodium
import Glibc
import SystemCalls
import SystemPackage

/// A member's public key: the X25519 key (libsodium `crypto_box`) a vault wraps its master key
/// to, and, for keys made since vault format 11, the Ed25519 key (`crypto_sign`) the member
/// signs their team log batches with. What people pass around to be added to a vault.
///
/// Why the X25519 half is the Ed25519 key converted (`crypto_sign_ed25519_pk_to_curve25519`),
/// not a key of its own: the slot that admits a member then names their signing key too, in a
/// way anyone can check, so nobody (another member holding the vault key included) can put a
/// signing key of their own under a member's name without also taking their slot from them.
/// Keys made before (32 bytes, X25519 alone) still open vaults; their owners cannot sign.
public struct MemberPublicKey: Equatable, Hashable, Sendable, CustomStringConvertible {
    /// The X25519 key alone (keys made before format 11).
    public static let boxKeyBytes = Int(crypto_box_publickeybytes())
    /// X25519 then Ed25519.
    public static let signingKeyBytes = boxKeyBytes + Int(crypto_sign_publickeybytes())
    public let bytes: [UInt8]

    init?(bytes: [UInt8]) {
        guard bytes.count == MemberPublicKey.boxKeyBytes || bytes.count == MemberPublicKey.signingKeyBytes else { return nil }
        if bytes.count == MemberPublicKey.signingKeyBytes {
            var converted = [UInt8](repeating: 0, count: MemberPublicKey.boxKeyBytes)
            let signing = Array(bytes[MemberPublicKey.boxKeyBytes...])
            guard crypto_sign_ed25519_pk_to_curve25519(&converted, signing) == 0,
                  converted == Array(bytes[..<MemberPublicKey.boxKeyBytes]) else { return nil }
        }
        self.bytes = bytes
    }

    /// What a sealed box to this member is sealed to.
    var boxKey: [UInt8] { Array(bytes.prefix(MemberPublicKey.boxKeyBytes)) }

    /// The Ed25519 key the member signs with; nil for a key made before format 11.
    public var signingKey: [UInt8]? {
        bytes.count == MemberPublicKey.signingKeyBytes ? Array(bytes[MemberPublicKey.boxKeyBytes...]) : nil
    }

    /// Standard base64 with padding (88 characters; 44 for a key without a signing half), as
    /// WireGuard and age print their keys: short enough to paste into a chat, and one line.
    public init?(base64: String) {
        Sodium.ensureInitialized()
        let text = Array(base64.utf8)
        var decoded = [UInt8](repeating: 0, count: MemberPublicKey.signingKeyBytes)
        var length = 0
        let rc = text.withUnsafeBufferPointer { input in
            input.withMemoryRebound(to: CChar.self) { chars in
                sodium_base642bin(&decoded, decoded.count, chars.baseAddress, chars.count, nil, &length, nil,
                                  sodium_base64_VARIANT_ORIGINAL)
            }
        }
        guard rc == 0, let key = MemberPublicKey(bytes: Array(decoded.prefix(length))) else { return nil }
        self = key
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
        let rc = crypto_box_seal(&sealed, plaintext.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(plaintext.count), boxKey)
        precondition(rc == 0, "crypto_box_seal failed")
        return sealed
    }
}

/// A member's key pair, the secret halves in locked memory. On disk (`member.key`) the public key
/// is in clear, so `member show` needs no passphrase, and the secret key is sealed with the
/// project's AEAD under an Argon2id key of the member's own passphrase. The associated data
/// names the file's purpose and version, the public key and the derivation's cost, so a secret
/// key pasted into another member's file, or a file whose cost was edited, fails to open.
///
/// Version 2 files (made since vault format 11) hold an Ed25519 secret key: its X25519 half
/// (`crypto_sign_ed25519_sk_to_curve25519`) opens the member's slots, the key itself signs
/// their team log batches. Version 1 files hold an X25519 secret key alone and still open.
public final class MemberKey: Sendable {
    public let publicKey: MemberPublicKey
    let secretKey: SecureBuffer
    /// The Ed25519 secret key of a version 2 file; nil for version 1.
    private let signingSecretKey: SecureBuffer?

    private init(publicKey: MemberPublicKey, secretKey: consuming SecureBuffer, signingSecretKey: consuming SecureBuffer?) {
        self.publicKey = publicKey
        self.secretKey = secretKey
        self.signingSecretKey = signingSecretKey
    }

    static let secretKeyBytes = Int(crypto_box_secretkeybytes())
    static let signatureBytes = Int(crypto_sign_bytes())
    private static let signingSecretKeyBytes = Int(crypto_sign_secretkeybytes())
    private static let magicPrefix: [UInt8] = Array("KCFSMEMBERKEY".utf8)
    private static func magic(_ version: UInt8) -> [UInt8] { magicPrefix + [version] }
    private static func fileBytes(_ version: UInt8) -> Int {
        version == 1
            ? magicPrefix.count + 1 + MemberPublicKey.boxKeyBytes + 24 + KeyDerivation.saltBytes + AEAD.overhead + secretKeyBytes
            : magicPrefix.count + 1 + MemberPublicKey.signingKeyBytes + 24 + KeyDerivation.saltBytes + AEAD.overhead + signingSecretKeyBytes
    }

    /// Whether this key can sign (a version 2 file).
    public var canSign: Bool { publicKey.signingKey != nil }

    /// The detached Ed25519 signature of `message`; nil for a key that cannot sign.
    func sign(_ message: UnsafeRawBufferPointer) -> [UInt8]? {
        var signature = [UInt8](repeating: 0, count: MemberKey.signatureBytes)
        let signed: Bool? = signingSecretKey?.withUnsafeBytes { sk in
            crypto_sign_detached(&signature, nil, message.baseAddress?.assumingMemoryBound(to: UInt8.self),
                                 UInt64(message.count), sk.baseAddress!.assumingMemoryBound(to: UInt8.self)) == 0
        }
        guard let signed else { return nil }
        precondition(signed, "crypto_sign_detached failed")
        return signature
    }

    /// Whether `signature` is `signingKey`'s over `message`.
    static func verify(_ signature: UnsafeRawBufferPointer, of message: UnsafeRawBufferPointer, by signingKey: [UInt8]) -> Bool {
        guard signature.count == signatureBytes, signingKey.count == Int(crypto_sign_publickeybytes()) else { return false }
        return crypto_sign_verify_detached(signature.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                           message.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(message.count),
                                           signingKey) == 0
    }

    /// `$XDG_DATA_HOME/keychainfs/member.key`, else `~/.local/share/keychainfs/member.key`.
    public static var defaultPath: String { XDGBaseDirectory.data.keychainfs + "/member.key" }

    /// Makes a key pair and writes it to `path` (0600, missing directories 0700); refuses an
    /// existing file, so a member never loses the key their vaults are wrapped to.
    @discardableResult
    public static func create(at path: String, passphrase: borrowing SecureBuffer, kdf: KDFParameters) throws(VaultError) -> MemberPublicKey {
        guard passphrase.count > 0 else { throw .invalidArgument("the passphrase is empty") }
        Sodium.ensureInitialized()
        var signingPublic = [UInt8](repeating: 0, count: Int(crypto_sign_publickeybytes()))
        var signing = try SecureBuffer(capacity: signingSecretKeyBytes)
        signing.withUnsafeMutableStorage { out in
            let rc = crypto_sign_keypair(&signingPublic, out.baseAddress!.assumingMemoryBound(to: UInt8.self))
            precondition(rc == 0, "crypto_sign_keypair failed")
            return out.count
        }
        var boxPublic = [UInt8](repeating: 0, count: MemberPublicKey.boxKeyBytes)
        precondition(crypto_sign_ed25519_pk_to_curve25519(&boxPublic, signingPublic) == 0, "an Ed25519 key without an X25519 half")
        guard let publicKey = MemberPublicKey(bytes: boxPublic + signingPublic) else { preconditionFailure("public key length") }
        let salt = randomBytes(KeyDerivation.saltBytes)
        let kek = try KeyDerivation.keyEncryptionKey(passphrase: passphrase, salt: salt, parameters: kdf)
        let sealed = signing.withUnsafeBytes {
            AEAD.seal($0, key: kek, associatedData: associatedData(2, publicKey, kdf))
        }
        var file = magic(2) + publicKey.bytes
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
        let count = stored.version == 1 ? secretKeyBytes : signingSecretKeyBytes
        var secret = try SecureBuffer(capacity: count)
        guard AEAD.open(stored.sealed, key: kek, associatedData: associatedData(stored.version, stored.publicKey, stored.parameters),
                        into: &secret),
              secret.count == count else { throw .wrongPassphrase }
        guard stored.version == 2 else { return MemberKey(publicKey: stored.publicKey, secretKey: secret, signingSecretKey: nil) }
        var box = try SecureBuffer(capacity: secretKeyBytes)
        secret.withUnsafeBytes { ed in
            box.withUnsafeMutableStorage { out in
                let rc = crypto_sign_ed25519_sk_to_curve25519(out.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                              ed.baseAddress!.assumingMemoryBound(to: UInt8.self))
                precondition(rc == 0, "crypto_sign_ed25519_sk_to_curve25519 failed")
                return out.count
            }
        }
        return MemberKey(publicKey: stored.publicKey, secretKey: box, signingSecretKey: secret)
    }

    /// Opens a sealed box (`crypto_box_seal`) addressed to this key into locked memory of
    /// exactly `count` bytes; false when it was not sealed to this key or is not that long.
    func openSealedBox(_ sealed: [UInt8], count: Int, into output: inout SecureBuffer) -> Bool {
        guard sealed.count == count + Int(crypto_box_sealbytes()), output.capacity >= count else { return false }
        var ok = false
        secretKey.withUnsafeBytes { sk in
            output.withUnsafeMutableStorage { out in
                ok = crypto_box_seal_open(out.baseAddress!.assumingMemoryBound(to: UInt8.self), sealed, UInt64(sealed.count),
                                          publicKey.boxKey, sk.baseAddress!.assumingMemoryBound(to: UInt8.self)) == 0
                return ok ? count : 0
            }
        }
        return ok
    }

    private static func associatedData(_ version: UInt8, _ publicKey: MemberPublicKey, _ parameters: KDFParameters) -> [UInt8] {
        var ad = magic(version) + Array("secret key".utf8) + publicKey.bytes
        ad.appendLittleEndian(UInt64(bitPattern: parameters.algorithm))
        ad.appendLittleEndian(parameters.opsLimit)
        ad.appendLittleEndian(parameters.memLimit)
        return ad
    }

    private struct StoredFile {
        let version: UInt8
        let publicKey: MemberPublicKey
        let parameters: KDFParameters
        let salt: [UInt8]
        let sealed: [UInt8]
    }

    private static func parse(_ file: [UInt8], _ path: String) throws(VaultError) -> StoredFile {
        guard file.count > magicPrefix.count, Array(file.prefix(magicPrefix.count)) == magicPrefix,
              case let version = file[magicPrefix.count], version == 1 || version == 2, file.count == fileBytes(version) else {
            throw .storageFailure("member key \(path): not a keychainfs member key")
        }
        var at = magicPrefix.count + 1
        let keyBytes = version == 1 ? MemberPublicKey.boxKeyBytes : MemberPublicKey.signingKeyBytes
        guard let publicKey = MemberPublicKey(bytes: Array(file[at ..< at + keyBytes])) else {
            throw .storageFailure("member key \(path): not a keychainfs member key (its public key's halves disagree)")
        }
        at += keyBytes
        func number() -> UInt64 {
            defer { at += 8 }
            return file[at ..< at + 8].reversed().reduce(0) { $0 << 8 | UInt64($1) }
        }
        let algorithm = Int64(bitPattern: number())
        var parameters = KDFParameters(opsLimit: number(), memLimit: number())
        parameters.algorithm = algorithm
        let salt = Array(file[at ..< at + KeyDerivation.saltBytes])
        at += KeyDerivation.saltBytes
        return StoredFile(version: version, publicKey: publicKey, parameters: parameters, salt: salt, sealed: Array(file[at...]))
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
        var buffer = [UInt8](repeating: 0, count: max(fileBytes(1), fileBytes(2)) + 1)
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
