import Daemon
import CSodium
import VaultCore

/// The plaintext start of an archive: what is needed to derive its key from its passphrase
/// (Argon2id salt and cost) and to start its libsodium secretstream. It is also the associated
/// data of the first message, so no byte of it can be changed unnoticed.
///
///     "KCFSARCH"  magic (8 bytes)
///     u8          archive format version (1)
///     u8          KDF algorithm (libsodium's crypto_pwhash_alg_argon2id13)
///     u64 LE      Argon2id operations limit
///     u64 LE      Argon2id memory limit in bytes
///     16 bytes    salt
///     24 bytes    secretstream header
/// Then messages, each a u32 LE length and that many bytes of secretstream ciphertext.
struct ArchiveHeader {
    static let magic: [UInt8] = Array("KCFSARCH".utf8)
    static let version: UInt8 = 1
    static let saltBytes = Int(crypto_pwhash_saltbytes())
    static let streamHeaderBytes = Int(crypto_secretstream_xchacha20poly1305_headerbytes())
    static let size = 8 + 1 + 1 + 8 + 8 + saltBytes + streamHeaderBytes
    /// The largest message a reader accepts: the largest item and its attributes, with room.
    static let maximumMessageBytes = Vault.maximumItemSizeLimit + 2 * Vault.maximumAttributeBytesPerNode + (1 << 16)

    var parameters: KDFParameters
    var salt: [UInt8]
    var streamHeader: [UInt8]

    var bytes: [UInt8] {
        var out = ArchiveHeader.magic
        out.append(ArchiveHeader.version)
        out.append(UInt8(parameters.algorithm))
        withUnsafeBytes(of: parameters.opsLimit.littleEndian) { out.append(contentsOf: $0) }
        withUnsafeBytes(of: parameters.memLimit.littleEndian) { out.append(contentsOf: $0) }
        return out + salt + streamHeader
    }

    init(parameters: KDFParameters, salt: [UInt8], streamHeader: [UInt8]) {
        self.parameters = parameters
        self.salt = salt
        self.streamHeader = streamHeader
    }

    /// Parses and bounds-checks a header before anything is authenticated: a cost far above
    /// libsodium's `sensitive` preset is refused rather than run.
    init(parsing bytes: [UInt8]) throws(VaultError) {
        guard bytes.count == ArchiveHeader.size, Array(bytes[0..<8]) == ArchiveHeader.magic else {
            throw .invalidArgument("not a keychainfs archive")
        }
        guard bytes[8] == ArchiveHeader.version else {
            throw .invalidArgument("archive format version \(bytes[8]) is not supported (this keychainfs reads \(ArchiveHeader.version))")
        }
        func integer(at offset: Int) -> UInt64 {
            (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[offset + $1]) << (8 * UInt64($1)) }
        }
        parameters = KDFParameters(opsLimit: integer(at: 10), memLimit: integer(at: 18))
        guard Int64(bytes[9]) == KDFParameters.argon2id,
              parameters.opsLimit >= UInt64(crypto_pwhash_opslimit_min()), parameters.opsLimit <= 32,
              parameters.memLimit >= UInt64(crypto_pwhash_memlimit_min()), parameters.memLimit <= 4 << 30 else {
            throw ArchiveRecord.malformed("unsupported key derivation parameters")
        }
        salt = Array(bytes[26..<26 + ArchiveHeader.saltBytes])
        streamHeader = Array(bytes[(26 + ArchiveHeader.saltBytes)...])
    }

    /// The stream key, in locked memory.
    func key(passphrase: borrowing SecureBuffer) throws(VaultError) -> SecureBuffer {
        var key = try SecureBuffer(capacity: Int(crypto_secretstream_xchacha20poly1305_keybytes()))
        var failed = false
        passphrase.withUnsafeBytes { pass in
            key.withUnsafeMutableStorage { out in
                failed = crypto_pwhash(out.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(out.count),
                                       pass.baseAddress!.assumingMemoryBound(to: CChar.self), UInt64(pass.count), salt,
                                       parameters.opsLimit, Int(parameters.memLimit), Int32(parameters.algorithm)) != 0
                return out.count
            }
        }
        guard !failed else { throw .secureMemoryUnavailable("Argon2id could not get \(parameters.memLimit) bytes of memory") }
        return key
    }

    /// Room for a secretstream state (which holds key material) in locked memory.
    static func streamState() throws(VaultError) -> SecureBuffer {
        try SecureBuffer(capacity: Int(crypto_secretstream_xchacha20poly1305_statebytes()))
    }
}
