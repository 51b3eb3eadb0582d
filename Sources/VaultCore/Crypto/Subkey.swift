/// One key in locked memory, shared by reference: a lock hands the keys that after-first-unlock
/// items need to a reduced cipher and drops the full one, and every key no cipher holds any
/// more is wiped as its buffer is freed.
final class Subkey: Sendable {
    let bytes: SecureBuffer

    init(_ bytes: consuming SecureBuffer) {
        self.bytes = bytes
    }

    /// Subkey `id` of the master key.
    convenience init(_ id: UInt64, of master: borrowing SecureBuffer) throws(VaultError) {
        self.init(try KeyDerivation.subkey(id, of: master))
    }
}
