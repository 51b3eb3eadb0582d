import CSodium

/// XChaCha20-Poly1305 (IETF) from libsodium. A sealed box is `nonce || ciphertext || tag`
/// with a random 192-bit nonce, so nonces never need coordinating between processes.
enum AEAD {
    static let keyBytes = Int(crypto_aead_xchacha20poly1305_ietf_keybytes())
    static let nonceBytes = Int(crypto_aead_xchacha20poly1305_ietf_npubbytes())
    static let tagBytes = Int(crypto_aead_xchacha20poly1305_ietf_abytes())
    static var overhead: Int { nonceBytes + tagBytes }

    static func seal(_ plaintext: UnsafeRawBufferPointer, key: borrowing SecureBuffer, associatedData: [UInt8]) -> [UInt8] {
        precondition(key.count == keyBytes, "AEAD key has the wrong length")
        var sealed = [UInt8](repeating: 0, count: nonceBytes + plaintext.count + tagBytes)
        sealed.withUnsafeMutableBytes { out in
            let nonce = out.baseAddress!.assumingMemoryBound(to: UInt8.self)
            randombytes_buf(nonce, nonceBytes)
            var written: UInt64 = 0
            let rc = key.withUnsafeBytes { k in
                associatedData.withUnsafeBufferPointer { ad in
                    crypto_aead_xchacha20poly1305_ietf_encrypt(
                        nonce + nonceBytes, &written,
                        plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(plaintext.count),
                        ad.baseAddress, UInt64(ad.count),
                        nil, nonce, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
            precondition(rc == 0 && Int(written) == plaintext.count + tagBytes, "AEAD encryption failed")
        }
        return sealed
    }

    /// Plaintext length of a sealed box, or nil when it is too short to be one.
    static func plaintextCount(ofSealed sealed: [UInt8]) -> Int? {
        sealed.count >= overhead ? sealed.count - overhead : nil
    }

    /// Opens a box into `output` (whose capacity must hold the plaintext). Returns false when
    /// authentication fails; `output` then holds nothing.
    static func open(_ sealed: [UInt8], key: borrowing SecureBuffer, associatedData: [UInt8],
                     into output: inout SecureBuffer) -> Bool {
        guard let plainCount = plaintextCount(ofSealed: sealed), output.capacity >= plainCount else { return false }
        var ok = false
        sealed.withUnsafeBytes { box in
            let nonce = box.baseAddress!.assumingMemoryBound(to: UInt8.self)
            key.withUnsafeBytes { k in
                associatedData.withUnsafeBufferPointer { ad in
                    output.withUnsafeMutableStorage { out in
                        var written: UInt64 = 0
                        let rc = crypto_aead_xchacha20poly1305_ietf_decrypt(
                            out.baseAddress!.assumingMemoryBound(to: UInt8.self), &written, nil,
                            nonce + nonceBytes, UInt64(box.count - nonceBytes),
                            ad.baseAddress, UInt64(ad.count),
                            nonce, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                        ok = rc == 0
                        return ok ? Int(written) : 0
                    }
                }
            }
        }
        return ok
    }
}

extension AEAD {
    /// Opens a small box of metadata (a name, attributes) into an ordinary array. Each
    /// sodium_malloc costs several system calls (guard pages, mlock), which dominated every
    /// lookup; names and attributes are not secret content, and callers wipe the array after use.
    static func openMetadata(_ sealed: [UInt8], key: borrowing SecureBuffer, associatedData: [UInt8]) -> [UInt8]? {
        guard let plainCount = plaintextCount(ofSealed: sealed) else { return nil }
        var plain = [UInt8](repeating: 0, count: plainCount)
        let rc = sealed.withUnsafeBytes { box in
            key.withUnsafeBytes { k in
                plain.withUnsafeMutableBufferPointer { out in
                    crypto_aead_xchacha20poly1305_ietf_decrypt(
                        out.baseAddress, nil, nil,
                        box.baseAddress!.assumingMemoryBound(to: UInt8.self) + nonceBytes, UInt64(box.count - nonceBytes),
                        associatedData, UInt64(associatedData.count),
                        box.baseAddress!.assumingMemoryBound(to: UInt8.self), k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
        }
        return rc == 0 ? plain : nil
    }
}

/// Wipes an array's bytes before it is released (names and other decrypted metadata that pass
/// through ordinary arrays).
public func wipe<Element: BitwiseCopyable>(_ array: inout [Element]) {
    array.withUnsafeMutableBytes { if let base = $0.baseAddress { sodium_memzero(base, $0.count) } }
}

/// Random bytes from libsodium's CSPRNG (getrandom).
func randomBytes(_ count: Int) -> [UInt8] {
    Sodium.ensureInitialized()
    var bytes = [UInt8](repeating: 0, count: count)
    bytes.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, count) }
    return bytes
}
