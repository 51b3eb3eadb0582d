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

extension KDFParameters {
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

/// The keys a vault holds, all derived from the master key, all in locked memory. Unlocked it
/// holds every one; locked, only those after-first-unlock items need (`afterFirstUnlockOnly`),
/// or none. A missing key makes what needs it fail as `.locked`.
struct VaultKeys: Sendable {
    /// Subkey ids of the master key (crypto_kdf); 8 belongs to the access log.
    enum ID: UInt64 {
        case content = 1, name = 2, tag = 3, header = 4, attributeTag = 5, attributeSearch = 6, rules = 7
        case afterFirstUnlockContent = 9, thisDeviceOnlyContent = 10, nodeAttributes = 11
        /// Keys each member slot's MAC (`MemberSlot`): derived when a slot is made or checked.
        case memberSlot = 12
    }

    /// When-unlocked contents, extended attribute values, and node attributes of layout 2 and
    /// older (sealed before node attributes had a key of their own).
    var content: Subkey?
    var name: Subkey?
    var tag: Subkey?
    var header: Subkey?
    /// Tags an attribute's name within its node (the row's key), apart from `tag` so that an
    /// attribute's tag never equals the tag of a same-named entry of the same dictionary.
    var attributeTag: Subkey?
    /// Tags an attribute's (name, value) pair, whatever node holds it: the search index.
    var attributeSearch: Subkey?
    /// After-first-unlock contents: kept through a lock.
    var afterFirstUnlockContent: Subkey?
    /// Combined with the host key into the key of this-device-only contents; never the key itself.
    var thisDeviceOnlyContent: Subkey?
    /// Node attributes of layout 3 (kind, size, times, class): kept through a lock, so a path
    /// to an after-first-unlock item can be walked without the when-unlocked content key.
    var nodeAttributes: Subkey?
    /// Keys the MAC over every access rule record (in the vault's row). Not kept through a
    /// lock: rules are read again at unlock.
    var rules: Subkey?

    init(master: borrowing SecureBuffer) throws(VaultError) {
        content = try Subkey(ID.content.rawValue, of: master)
        name = try Subkey(ID.name.rawValue, of: master)
        tag = try Subkey(ID.tag.rawValue, of: master)
        header = try Subkey(ID.header.rawValue, of: master)
        attributeTag = try Subkey(ID.attributeTag.rawValue, of: master)
        attributeSearch = try Subkey(ID.attributeSearch.rawValue, of: master)
        afterFirstUnlockContent = try Subkey(ID.afterFirstUnlockContent.rawValue, of: master)
        thisDeviceOnlyContent = try Subkey(ID.thisDeviceOnlyContent.rawValue, of: master)
        nodeAttributes = try Subkey(ID.nodeAttributes.rawValue, of: master)
        rules = try Subkey(ID.rules.rawValue, of: master)
    }

    private init() {}

    /// What reaching an after-first-unlock item by path and reading and storing it takes:
    /// lookup tags and names (to walk the path), node attributes, and that class's content key.
    /// Not the when-unlocked content key, the header key, the attribute keys, nor the
    /// this-device-only key: this-device-only items are as unreachable as when-unlocked ones
    /// while locked. (The vault keeps the search tags' key apart, see `Vault.lock`.)
    var afterFirstUnlockOnly: VaultKeys {
        var kept = VaultKeys()
        kept.name = name
        kept.tag = tag
        kept.afterFirstUnlockContent = afterFirstUnlockContent
        kept.nodeAttributes = nodeAttributes
        return kept
    }

    /// Keyed BLAKE2b over arbitrary bytes (lookup tags, header MAC).
    static func keyedHash(_ message: [UInt8], key: Subkey) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        key.bytes.withUnsafeBytes { k in
            let rc = crypto_generichash(&out, 32, message, UInt64(message.count),
                                        k.baseAddress!.assumingMemoryBound(to: UInt8.self), k.count)
            precondition(rc == 0, "crypto_generichash failed")
        }
        return out
    }

    /// Keyed BLAKE2b over the concatenation of `parts`, fed to it in place: secret parts (an
    /// attribute's value, in locked memory) need no copy. The hash state, which depends on the
    /// key and the parts, is wiped before returning.
    static func keyedHash(_ parts: [UnsafeRawBufferPointer], key: Subkey) -> [UInt8] {
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
        key.bytes.withUnsafeBytes { k in
            var rc = crypto_generichash_init(state, k.baseAddress!.assumingMemoryBound(to: UInt8.self), k.count, 32)
            for part in parts where rc == 0 && part.count > 0 {
                rc = crypto_generichash_update(state, part.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(part.count))
            }
            if rc == 0 { rc = crypto_generichash_final(state, &out, 32) }
            precondition(rc == 0, "crypto_generichash failed")
        }
        return out
    }

    /// The this-device-only content key: keyed BLAKE2b of the host key under subkey 10, so it
    /// takes both the vault's master key and this machine's host key. Straight into locked memory.
    static func thisDeviceOnlyKey(base: Subkey, hostKey: borrowing SecureBuffer) throws(VaultError) -> Subkey {
        var derived = try SecureBuffer(capacity: AEAD.keyBytes)
        base.bytes.withUnsafeBytes { k in
            hostKey.withUnsafeBytes { h in
                derived.withUnsafeMutableStorage { out in
                    let rc = crypto_generichash(out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count,
                                                h.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(h.count),
                                                k.baseAddress!.assumingMemoryBound(to: UInt8.self), k.count)
                    precondition(rc == 0, "crypto_generichash failed")
                    return out.count
                }
            }
        }
        return Subkey(derived)
    }
}
