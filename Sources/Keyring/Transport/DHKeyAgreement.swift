import CCrypto
import VaultCore

/// Our half of the key agreement: a fresh private exponent (kept in OpenSSL secure memory or wiped on deinit), our public value.
///
/// The private exponent never leaves OpenSSL: it lives in the EVP_PKEY, whose BIGNUM OpenSSL
/// allocates with BN_secure_new (the ordinary heap, as no OpenSSL secure heap is set up: its
/// fixed size would cap the number of open sessions) and frees with BN_clear_free, so it is
/// wiped when this agreement is released with the session that owns it.
final class DHKeyAgreement {
    /// EVP_PKEY of the group with our private and public values.
    private let keyPair: OpaquePointer

    /// Our public value, big-endian, as sent back in OpenSession's output variant (ay).
    /// Always the prime's 128 bytes (leading zeros kept), which every client reads as a number.
    let publicKey: [UInt8]

    init() throws(TransportError) {
        let group = try OakleyGroup2.key()
        defer { EVP_PKEY_free(group) }
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, group, nil) else { throw .openSSL("EVP_PKEY_CTX_new_from_pkey") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1 else { throw .openSSL("EVP_PKEY_keygen_init") }
        var generated: OpaquePointer?
        guard EVP_PKEY_keygen(context, &generated) == 1, let generated else { throw .openSSL("EVP_PKEY_keygen") }

        var value: OpaquePointer?
        guard EVP_PKEY_get_bn_param(generated, ccrypto_param_pub_key(), &value) == 1, let value else {
            EVP_PKEY_free(generated)
            throw .openSSL("EVP_PKEY_get_bn_param")
        }
        defer { BN_free(value) }
        var bytes = [UInt8](repeating: 0, count: OakleyGroup2.byteCount)
        guard BN_bn2binpad(value, &bytes, Int32(bytes.count)) == Int32(bytes.count) else {
            EVP_PKEY_free(generated)
            throw .openSSL("BN_bn2binpad")
        }
        keyPair = generated
        publicKey = bytes
    }

    deinit { EVP_PKEY_free(keyPair) }

    /// The AES-128 key from the client's public value; throws on a value outside [2, p-2] (reject 0, 1, p-1, >= p) or of wrong length (> 128 bytes).
    ///
    /// As libsecret, gnome-keyring and secretstorage do: the shared secret, left-padded with
    /// zeros to the prime's 128 bytes, is the input key of HKDF-SHA256 (RFC 5869) with no salt
    /// (which the RFC defines as 32 zero bytes) and empty info; the first 16 bytes of output
    /// are the key.
    func sessionKey(peerPublicKey: [UInt8]) throws(TransportError) -> TransportKey {
        guard peerPublicKey.count <= OakleyGroup2.byteCount else {
            throw .invalidPublicKey("\(peerPublicKey.count) bytes, more than the group's \(OakleyGroup2.byteCount)")
        }
        let peer = try Self.peerKey(peerPublicKey)
        defer { EVP_PKEY_free(peer) }

        var shared = try TransportKey.lockedBuffer(capacity: OakleyGroup2.byteCount)
        try shared.withUnsafeMutableStorage { (storage) throws(TransportError) -> Int in
            guard let context = EVP_PKEY_CTX_new_from_pkey(nil, keyPair, nil) else { throw .openSSL("EVP_PKEY_CTX_new_from_pkey") }
            defer { EVP_PKEY_CTX_free(context) }
            guard EVP_PKEY_derive_init(context) == 1 else { throw .openSSL("EVP_PKEY_derive_init") }
            // Without padding OpenSSL drops leading zero bytes, and one secret in 256 would
            // give a key the client does not get.
            guard EVP_PKEY_CTX_set_dh_pad(context, 1) == 1 else { throw .openSSL("EVP_PKEY_CTX_set_dh_pad") }
            guard EVP_PKEY_derive_set_peer(context, peer) == 1 else { throw .openSSL("EVP_PKEY_derive_set_peer") }
            var length = storage.count
            guard EVP_PKEY_derive(context, storage.baseAddress!.assumingMemoryBound(to: UInt8.self), &length) == 1 else {
                throw .openSSL("EVP_PKEY_derive")
            }
            guard length == OakleyGroup2.byteCount else { throw .cryptoFailure("the shared secret came out \(length) bytes long") }
            return length
        }

        var key = try TransportKey.lockedBuffer(capacity: TransportKey.byteCount)
        try shared.withUnsafeBytes { (secret) throws(TransportError) in
            try key.withUnsafeMutableStorage { (storage) throws(TransportError) -> Int in
                try Self.hkdfSHA256(secret: secret, into: storage)
                return storage.count
            }
        }
        return TransportKey(key: key)
    }

    /// The client's value as an EVP_PKEY of the group, after the range check that keeps a
    /// client from forcing the shared secret to 1 or ±1 (values 0, 1, p-1) or past the group.
    private static func peerKey(_ bytes: [UInt8]) throws(TransportError) -> OpaquePointer {
        guard let value = BN_bin2bn(bytes, Int32(bytes.count), nil) else { throw .openSSL("BN_bin2bn") }
        defer { BN_free(value) }
        let p = try OakleyGroup2.prime()
        defer { BN_free(p) }
        guard BN_sub_word(p, 1) == 1 else { throw .openSSL("BN_sub_word") }
        guard BN_cmp(value, BN_value_one()) > 0, BN_cmp(value, p) < 0 else {
            throw .invalidPublicKey("the value is outside [2, p-2]")
        }
        return try OakleyGroup2.key(publicValue: value)
    }

    /// HKDF-SHA256 of `secret` with no salt and no info, filling `output`. OpenSSL wipes its
    /// intermediate pseudorandom key itself.
    private static func hkdfSHA256(secret: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws(TransportError) {
        guard let kdf = EVP_KDF_fetch(nil, "HKDF", nil) else { throw .openSSL("EVP_KDF_fetch") }
        defer { EVP_KDF_free(kdf) }
        guard let context = EVP_KDF_CTX_new(kdf) else { throw .openSSL("EVP_KDF_CTX_new") }
        defer { EVP_KDF_CTX_free(context) }
        var digest = Array("SHA256".utf8CString)
        let derived = digest.withUnsafeMutableBufferPointer { name in
            var params = [
                OSSL_PARAM_construct_utf8_string(ccrypto_param_kdf_digest(), name.baseAddress, 0),
                OSSL_PARAM_construct_octet_string(ccrypto_param_kdf_key(), UnsafeMutableRawPointer(mutating: secret.baseAddress), secret.count),
                OSSL_PARAM_construct_end(),
            ]
            return EVP_KDF_derive(context, output.baseAddress!.assumingMemoryBound(to: UInt8.self), output.count, &params)
        }
        guard derived == 1 else { throw .openSSL("EVP_KDF_derive") }
    }
}
