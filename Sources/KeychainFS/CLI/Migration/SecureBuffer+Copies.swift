import VaultCore

extension SecureBuffer {
    /// A copy in locked memory of its own: a batch of entries keeps its secrets while the
    /// source's buffers go.
    func copy() throws(VaultError) -> SecureBuffer {
        try withUnsafeBytes { (bytes) throws(VaultError) in try SecureBuffer(copying: bytes) }
    }

    static func copy(_ buffer: borrowing SecureBuffer?) throws(VaultError) -> SecureBuffer? {
        switch buffer {
        case .some(let value): try value.copy()
        case .none: nil
        }
    }
}
