import CCrypto
import VaultCore

/// The 16-byte AES key of one session, in a SecureBuffer (VaultCore's; locked memory, wiped).
struct TransportKey: ~Copyable {
    static let byteCount = 16
    /// AES's block, hence the IV's length and the padding's unit.
    static let blockSize = 16

    private let key: SecureBuffer

    init(key: consuming SecureBuffer) {
        precondition(key.count == Self.byteCount, "an AES-128 key is 16 bytes")
        self.key = key
    }

    /// A secret for the client: a fresh random IV and the ciphertext (not secret).
    func encrypt(_ plaintext: borrowing SecureBuffer) throws(TransportError) -> (iv: [UInt8], ciphertext: [UInt8]) {
        // OpenSSL counts in Int32.
        guard plaintext.count <= Int(Int32.max) - Self.blockSize else {
            throw .invalidParameters("a secret of \(plaintext.count) bytes is too large")
        }
        var iv = [UInt8](repeating: 0, count: Self.blockSize)
        guard RAND_bytes(&iv, Int32(iv.count)) == 1 else { throw .openSSL("RAND_bytes") }
        // PKCS#7 always adds 1 to 16 bytes, so a whole block follows an aligned secret.
        var ciphertext = [UInt8](repeating: 0, count: (plaintext.count / Self.blockSize + 1) * Self.blockSize)

        guard let context = EVP_CIPHER_CTX_new() else { throw .openSSL("EVP_CIPHER_CTX_new") }
        // Freeing the context wipes the partial block of plaintext it buffers.
        defer { EVP_CIPHER_CTX_free(context) }
        let initialized = key.withUnsafeBytes { k in
            EVP_EncryptInit_ex(context, EVP_aes_128_cbc(), nil, k.baseAddress!.assumingMemoryBound(to: UInt8.self), iv)
        }
        guard initialized == 1 else { throw .openSSL("EVP_EncryptInit_ex") }
        var written: Int32 = 0
        if plaintext.count > 0 {
            let updated = plaintext.withUnsafeBytes { p in
                EVP_EncryptUpdate(context, &ciphertext, &written, p.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(p.count))
            }
            guard updated == 1 else { throw .openSSL("EVP_EncryptUpdate") }
        }
        var last: Int32 = 0
        let finished = ciphertext.withUnsafeMutableBufferPointer { out in
            EVP_EncryptFinal_ex(context, out.baseAddress! + Int(written), &last)
        }
        guard finished == 1 else { throw .openSSL("EVP_EncryptFinal_ex") }
        guard Int(written + last) == ciphertext.count else {
            throw .cryptoFailure("the ciphertext came out \(written + last) bytes long, not \(ciphertext.count)")
        }
        return (iv, ciphertext)
    }

    /// A secret from the client: IV must be 16 bytes, ciphertext a non-empty multiple of 16, padding valid; the plaintext in a SecureBuffer. Any OpenSSL scratch holding plaintext is wiped.
    ///
    /// The plaintext goes straight from OpenSSL into locked memory of the ciphertext's length:
    /// with padding on, EVP_DecryptUpdate holds the last block back (it may be padding), so it
    /// writes at most length - 16 bytes, and EVP_DecryptFinal_ex at most 15 after them.
    /// OpenSSL keeps that held-back block in its context and clears it when the context is freed.
    func decrypt(iv: [UInt8], ciphertext: [UInt8]) throws(TransportError) -> SecureBuffer {
        guard iv.count == Self.blockSize else {
            throw .invalidParameters("the IV (parameters) is \(iv.count) bytes, not \(Self.blockSize)")
        }
        guard !ciphertext.isEmpty, ciphertext.count % Self.blockSize == 0 else {
            throw .invalidParameters("the ciphertext is \(ciphertext.count) bytes, not a positive multiple of \(Self.blockSize)")
        }
        guard ciphertext.count <= Int(Int32.max) else {
            throw .invalidParameters("a ciphertext of \(ciphertext.count) bytes is too large")
        }
        var plaintext = try Self.lockedBuffer(capacity: ciphertext.count)
        try plaintext.withUnsafeMutableStorage { (storage) throws(TransportError) -> Int in
            guard let context = EVP_CIPHER_CTX_new() else { throw .openSSL("EVP_CIPHER_CTX_new") }
            defer { EVP_CIPHER_CTX_free(context) }
            let initialized = key.withUnsafeBytes { k in
                EVP_DecryptInit_ex(context, EVP_aes_128_cbc(), nil, k.baseAddress!.assumingMemoryBound(to: UInt8.self), iv)
            }
            guard initialized == 1 else { throw .openSSL("EVP_DecryptInit_ex") }
            let out = storage.baseAddress!.assumingMemoryBound(to: UInt8.self)
            var written: Int32 = 0
            guard EVP_DecryptUpdate(context, out, &written, ciphertext, Int32(ciphertext.count)) == 1 else {
                throw .openSSL("EVP_DecryptUpdate")
            }
            var last: Int32 = 0
            guard EVP_DecryptFinal_ex(context, out + Int(written), &last) == 1 else {
                // With whole blocks in, padding is the only thing that can fail here.
                ERR_clear_error()
                throw .badPadding
            }
            return Int(written + last)
        }
        return plaintext
    }

    /// Locked memory for key material or plaintext, failing as the transport fails.
    static func lockedBuffer(capacity: Int) throws(TransportError) -> SecureBuffer {
        do { return try SecureBuffer(capacity: capacity) } catch { throw .secureMemory("\(error)") }
    }
}
