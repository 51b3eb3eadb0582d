import CSodium
import VaultCore

/// What makes an item the same item to a migration: its label and its attributes (names and
/// values), as a Secret Service client finds it, but for `xdg:schema`, which gnome-keyring adds
/// to an item stored without it once it writes its keyring again (a second run would see new
/// items); the secret is not part of it, so an item whose secret changed at the source is
/// still the one imported before. Kept as a BLAKE2b digest
/// under a key drawn for this run, so that labels and values are compared without leaving
/// locked memory and the digest says nothing about them past the run.
struct ItemIdentity: Hashable {
    private let digest: [UInt8]

    private static let schema = try! AttributeName("xdg:schema")

    /// One key per run: digests of two runs are never compared.
    final class Key {
        fileprivate let bytes: SecureBuffer

        init() throws(VaultError) {
            var key = try SecureBuffer(capacity: Int(crypto_generichash_KEYBYTES))
            key.withUnsafeMutableStorage { storage in
                randombytes_buf(storage.baseAddress!, storage.count)
                return storage.count
            }
            bytes = key
        }
    }

    /// `label`: empty for none (an item made by `keychainfs set` has none); attributes are
    /// taken in name order whatever order they come in.
    init(label: UnsafeRawBufferPointer, attributes: [Attribute], key: Key) {
        let state = UnsafeMutableRawPointer.allocate(byteCount: crypto_generichash_statebytes(), alignment: 64)
        defer {
            sodium_memzero(state, crypto_generichash_statebytes())
            state.deallocate()
        }
        let opaque = OpaquePointer(state)
        key.bytes.withUnsafeBytes { k in
            _ = crypto_generichash_init(opaque, k.baseAddress!.assumingMemoryBound(to: UInt8.self), k.count, 32)
        }
        Self.absorb(label, into: opaque)
        for attribute in attributes.sorted(by: { $0.name < $1.name }) where attribute.name != Self.schema {
            attribute.name.withUnsafeBytes { Self.absorb($0, into: opaque) }
            attribute.value.withUnsafeBytes { Self.absorb($0, into: opaque) }
        }
        var out = [UInt8](repeating: 0, count: 32)
        crypto_generichash_final(opaque, &out, out.count)
        digest = out
    }

    /// Length first, so that ("ab", "c") and ("a", "bc") differ.
    private static func absorb(_ bytes: UnsafeRawBufferPointer, into state: OpaquePointer) {
        var length = UInt64(bytes.count).littleEndian
        withUnsafeBytes(of: &length) { _ = crypto_generichash_update(state, $0.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64($0.count)) }
        if let start = bytes.baseAddress {
            _ = crypto_generichash_update(state, start.assumingMemoryBound(to: UInt8.self), UInt64(bytes.count))
        }
    }
}
