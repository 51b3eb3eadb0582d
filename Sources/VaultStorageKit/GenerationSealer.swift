/// What seals a vault's state as a write commits (`VaultStorage.generationCipher`): VaultCore's
/// `RecordCipher`. The storage computes nothing itself; it hands the state it is about to store
/// over and stores the MAC it gets back, in the same transaction.
package protocol GenerationSealer: AnyObject, Sendable {
    func stateMAC(_ state: VaultState) -> [UInt8]
}
