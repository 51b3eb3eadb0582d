/// Argon2id parameters as stored in a key slot.
public struct KDFParameters: Sendable, Equatable {
    /// crypto_pwhash_ALG_ARGON2ID13: the kit links no libsodium, so VaultCoreTests checks the two agree.
    public static let argon2id: Int64 = 2
    public var algorithm: Int64 = KDFParameters.argon2id
    public var opsLimit: UInt64
    public var memLimit: UInt64

    public init(opsLimit: UInt64, memLimit: UInt64) {
        self.opsLimit = opsLimit
        self.memLimit = memLimit
    }
}
