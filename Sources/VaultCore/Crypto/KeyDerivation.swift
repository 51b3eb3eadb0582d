import CSodium

/// Argon2id cost presets, libsodium's own three.
public enum KDFPreset: String, CaseIterable, Sendable {
    case interactive, moderate, sensitive

    public var parameters: KDFParameters {
        switch self {
        case .interactive:
            return KDFParameters(opsLimit: UInt64(crypto_pwhash_opslimit_interactive()),
                                 memLimit: UInt64(crypto_pwhash_memlimit_interactive()))
        case .moderate:
            return KDFParameters(opsLimit: UInt64(crypto_pwhash_opslimit_moderate()),
                                 memLimit: UInt64(crypto_pwhash_memlimit_moderate()))
        case .sensitive:
            return KDFParameters(opsLimit: UInt64(crypto_pwhash_opslimit_sensitive()),
                                 memLimit: UInt64(crypto_pwhash_memlimit_sensitive()))
        }
    }
}

/// Argon2id parameters as stored in a key slot.
public struct KDFParameters: Sendable, Equatable {
    public static let argon2id = Int64(crypto_pwhash_alg_argon2id13())
    public var algorithm: Int64 = KDFParameters.argon2id
    public var opsLimit: UInt64
    public var memLimit: UInt64

    public init(opsLimit: UInt64, memLimit: UInt64) {
        self.opsLimit = opsLimit
        self.memLimit = memLimit
    }

    /// Parameters are read before anything is authenticated, so costs far above the
    /// `sensitive` preset are refused rather than run (an edited slot must not hang us).
    var isSupported: Bool {
        algorithm == KDFParameters.argon2id
            && opsLimit >= UInt64(crypto_pwhash_opslimit_min()) && opsLimit <= 32
            && memLimit >= UInt64(crypto_pwhash_memlimit_min()) && memLimit <= 4 << 30
    }
}

enum KeyDerivation {
    static let saltBytes = Int(crypto_pwhash_saltbytes())
    static let masterKeyBytes = 32

    /// Passphrase -> key-encryption key. The Argon2 output goes straight into locked memory
    /// and is wiped when the caller drops it.
    static func keyEncryptionKey(passphrase: borrowing SecureBuffer, salt: [UInt8],
                                 parameters: KDFParameters) throws(VaultError) -> SecureBuffer {
        guard parameters.isSupported, salt.count == saltBytes else {
            throw .integrityFailure("key slot (implausible key-derivation parameters)")
        }
        var kek = try SecureBuffer(capacity: AEAD.keyBytes)
        var rc: Int32 = -1
        passphrase.withUnsafeBytes { pw in
            kek.withUnsafeMutableStorage { out in
                rc = crypto_pwhash(out.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(out.count),
                                   pw.baseAddress!.assumingMemoryBound(to: CChar.self), UInt64(pw.count),
                                   salt, parameters.opsLimit, Int(parameters.memLimit), Int32(parameters.algorithm))
                return out.count
            }
        }
        // The passphrase passed through BLAKE2b's stack frames; wipe them before returning.
        csodium_scrub_stack()
        guard rc == 0 else {
            throw .storageFailure("Argon2id could not allocate \(parameters.memLimit >> 20) MiB of memory")
        }
        return kek
    }

    static func randomMasterKey() throws(VaultError) -> SecureBuffer {
        var key = try SecureBuffer(capacity: masterKeyBytes)
        key.withUnsafeMutableStorage { out in
            randombytes_buf(out.baseAddress!, out.count)
            return out.count
        }
        return key
    }

    /// Subkey `id` of the master key (libsodium's crypto_kdf, BLAKE2b-based).
    static func subkey(_ id: UInt64, of master: borrowing SecureBuffer) throws(VaultError) -> SecureBuffer {
        var sub = try SecureBuffer(capacity: AEAD.keyBytes)
        master.withUnsafeBytes { m in
            sub.withUnsafeMutableStorage { out in
                let rc = crypto_kdf_derive_from_key(out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count, id,
                                                    "KCFSkeys", m.baseAddress!.assumingMemoryBound(to: UInt8.self))
                precondition(rc == 0, "crypto_kdf_derive_from_key failed")
                return out.count
            }
        }
        return sub
    }
}

/// The keys an unlocked vault holds; all derived from the master key, all in locked memory.
struct VaultKeys: ~Copyable {
    let content: SecureBuffer
    let name: SecureBuffer
    let tag: SecureBuffer
    let header: SecureBuffer
    /// Tags an attribute's name within its node (the row's key), apart from `tag` so that an
    /// attribute's tag never equals the tag of a same-named entry of the same dictionary.
    let attributeTag: SecureBuffer
    /// Tags an attribute's (name, value) pair, whatever node holds it: the search index.
    let attributeSearch: SecureBuffer
    /// Keys the MAC over every access rule record (in the vault's row).
    let rules: SecureBuffer

    init(master: borrowing SecureBuffer) throws(VaultError) {
        let content = try KeyDerivation.subkey(1, of: master)
        let name = try KeyDerivation.subkey(2, of: master)
        let tag = try KeyDerivation.subkey(3, of: master)
        let header = try KeyDerivation.subkey(4, of: master)
        let attributeTag = try KeyDerivation.subkey(5, of: master)
        let attributeSearch = try KeyDerivation.subkey(6, of: master)
        let rules = try KeyDerivation.subkey(7, of: master)
        self.content = content
        self.name = name
        self.tag = tag
        self.header = header
        self.attributeTag = attributeTag
        self.attributeSearch = attributeSearch
        self.rules = rules
    }

    /// Keyed BLAKE2b over arbitrary bytes (lookup tags, header MAC).
    static func keyedHash(_ message: [UInt8], key: borrowing SecureBuffer) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        key.withUnsafeBytes { k in
            let rc = crypto_generichash(&out, 32, message, UInt64(message.count),
                                        k.baseAddress!.assumingMemoryBound(to: UInt8.self), k.count)
            precondition(rc == 0, "crypto_generichash failed")
        }
        return out
    }

    /// Keyed BLAKE2b over the concatenation of `parts`, fed to it in place: secret parts (an
    /// attribute's value, in locked memory) need no copy. The hash state, which depends on the
    /// key and the parts, is wiped before returning.
    static func keyedHash(_ parts: [UnsafeRawBufferPointer], key: borrowing SecureBuffer) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        // libsodium declares the state 64-byte aligned; a heap allocation makes sure of it.
        let stateBytes = crypto_generichash_statebytes()
        let raw = UnsafeMutableRawPointer.allocate(byteCount: stateBytes, alignment: 64)
        defer {
            sodium_memzero(raw, stateBytes)
            raw.deallocate()
        }
        // Swift does not import the over-aligned state type; the functions take it opaque.
        let state = OpaquePointer(raw)
        key.withUnsafeBytes { k in
            var rc = crypto_generichash_init(state, k.baseAddress!.assumingMemoryBound(to: UInt8.self), k.count, 32)
            for part in parts where rc == 0 && part.count > 0 {
                rc = crypto_generichash_update(state, part.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(part.count))
            }
            if rc == 0 { rc = crypto_generichash_final(state, &out, 32) }
            precondition(rc == 0, "crypto_generichash failed")
        }
        return out
    }
}
