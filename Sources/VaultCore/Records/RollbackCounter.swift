import CSodium
import TPMSeal

/// The TPM's half of the rollback defence (`SeenGenerations`): one NV counter per vault
/// location and state file, which only goes up and which no copy of a file sets back. Its index
/// is found again without anything stored: a tag (BLAKE2b of the vault's id, its location and
/// the state file's path) is the index's authPolicy, and the preferred handle is derived from
/// the tag, in the TCG registry's first owner range (0x01000000-0x013FFFFF); a handle taken by
/// another index is passed over (up to `TPMConnection.counterProbes`). nil without a TPM.
struct RollbackCounter {
    static let firstHandle: UInt32 = 0x0100_0000
    static let handleRange: UInt32 = 0x0040_0000

    private let connection: TPMConnection
    private let tag: [UInt8]
    private let preferred: UInt32

    init?(vaultID: [UInt8], location: String, statePath: String) {
        guard let configuration = TPMConnection.configuration,
              let connection = try? TPMConnection(configuration: configuration) else { return nil }
        self.connection = connection
        var message = Array("keychainfs rollback counter".utf8) + [0]
        for part in [vaultID, Array(location.utf8), Array(statePath.utf8)] {
            message.appendLittleEndian(UInt64(part.count))
            message += part
        }
        var tag = [UInt8](repeating: 0, count: 32)
        precondition(crypto_generichash(&tag, 32, message, UInt64(message.count), nil, 0) == 0, "crypto_generichash failed")
        self.tag = tag
        let derived = tag.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        preferred = RollbackCounter.firstHandle + derived % (RollbackCounter.handleRange - TPMConnection.counterProbes)
    }

    /// The counter as it is, nil when this TPM has none for this vault yet.
    func existing() throws(TPMFailure) -> (handle: UInt32, value: UInt64?)? {
        try connection.findCounter(tag: tag, preferred: preferred)
    }

    /// The counter, made (and incremented once) when there was none.
    func current() throws(TPMFailure) -> TPMConnection.Counter {
        try connection.counter(tag: tag, preferred: preferred)
    }

    func increment(handle: UInt32) throws(TPMFailure) -> UInt64 {
        try connection.increment(handle: handle)
    }
}
