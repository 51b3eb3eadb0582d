import CCrypto

/// The Diffie-Hellman group the algorithm is named after: the 1024-bit MODP group of RFC 2409
/// ("Second Oakley Group"), generator 2. The prime comes from OpenSSL, which ships it, rather
/// than from a constant typed here.
enum OakleyGroup2 {
    /// Bytes of the prime, hence of a public value and of the shared secret.
    static let byteCount = 128

    /// A new BIGNUM holding the prime; the caller frees it.
    static func prime() throws(TransportError) -> OpaquePointer {
        guard let p = BN_get_rfc2409_prime_1024(nil) else { throw .openSSL("BN_get_rfc2409_prime_1024") }
        return p
    }

    /// An EVP_PKEY holding the group, or the group and the public value `publicValue` (a
    /// BIGNUM); the caller frees it.
    static func key(publicValue: OpaquePointer? = nil) throws(TransportError) -> OpaquePointer {
        let p = try prime()
        defer { BN_free(p) }
        guard let g = BN_new() else { throw .openSSL("BN_new") }
        defer { BN_free(g) }
        guard BN_set_word(g, 2) == 1 else { throw .openSSL("BN_set_word") }

        guard let builder = OSSL_PARAM_BLD_new() else { throw .openSSL("OSSL_PARAM_BLD_new") }
        defer { OSSL_PARAM_BLD_free(builder) }
        guard OSSL_PARAM_BLD_push_BN(builder, ccrypto_param_ffc_p(), p) == 1,
              OSSL_PARAM_BLD_push_BN(builder, ccrypto_param_ffc_g(), g) == 1,
              publicValue.map({ OSSL_PARAM_BLD_push_BN(builder, ccrypto_param_pub_key(), $0) == 1 }) ?? true
        else { throw .openSSL("OSSL_PARAM_BLD_push_BN") }
        guard let params = OSSL_PARAM_BLD_to_param(builder) else { throw .openSSL("OSSL_PARAM_BLD_to_param") }
        defer { OSSL_PARAM_free(params) }

        // By number, not by name: the context keeps the name's pointer past this call.
        guard let context = EVP_PKEY_CTX_new_id(EVP_PKEY_DH, nil) else { throw .openSSL("EVP_PKEY_CTX_new_id") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_fromdata_init(context) == 1 else { throw .openSSL("EVP_PKEY_fromdata_init") }
        var key: OpaquePointer?
        let selection = publicValue == nil ? ccrypto_select_domain_parameters() : ccrypto_select_public_key()
        guard EVP_PKEY_fromdata(context, &key, selection, params) == 1, let key else { throw .openSSL("EVP_PKEY_fromdata") }
        return key
    }
}
