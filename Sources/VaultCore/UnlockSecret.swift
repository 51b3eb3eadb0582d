/// Which way into the vault an unlock's secret opens: the passphrase slot, or the TPM PIN slot.
public enum UnlockSecret: String, Sendable {
    case passphrase
    case pin
}

extension Vault {
    /// `unlock(passphrase:)` or `unlock(pin:)`, as `kind` says.
    public func unlock(_ secret: borrowing SecureBuffer, as kind: UnlockSecret) throws(VaultError) {
        switch kind {
        case .passphrase: try unlock(passphrase: secret)
        case .pin: try unlock(pin: secret)
        }
    }
}
