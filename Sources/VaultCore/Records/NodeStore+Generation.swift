/// The vault's state at its generation (format 8 on, see `VaultState`), checked inside a
/// transaction the caller opened: the MAC binding the generation to the header's, the rules'
/// and the members' MACs, and the members' MAC over the member slot rows. The rules' MAC over
/// the rule rows is checked where rules are read (`ruleSets`).
extension NodeStore {
    /// The state as stored, its MAC and the members' MAC holding. Rows (and their MAC) put
    /// back from an older copy of the vault fail here, as tampering; the whole row put back is
    /// consistent, and only an older generation than a machine saw tells it (`SeenGenerations`).
    func checkedState() throws(VaultError) -> VaultState {
        guard let state = try storage.vaultState() else { throw .integrityFailure("vault header (missing)") }
        guard cipher.stateMACMatches(state) else {
            throw .integrityFailure("the vault's state at generation \(state.generation) (its access rules, member slots or header "
                                    + "were not written with it: rows and their MAC copied from another copy of the vault)")
        }
        guard cipher.membersMACMatches(state.membersMAC, try storage.memberSlots()) else {
            throw .integrityFailure("the member slots (a slot was added, deleted or put back outside keychainfs)")
        }
        return state
    }

    /// Whether the vault has a sealed state to check: format 8 on, a cipher holding the header
    /// key, and not a write that already changed what the state binds (checked before that
    /// change, in the same transaction, and sealed again as it commits).
    var hasCheckableState: Bool {
        get throws(VaultError) {
            guard cipher.holdsEveryKey, !storage.sealedPartsChanged else { return false }
            return try storage.formatVersion() >= VaultFormat.oldestWithGeneration
        }
    }

    /// The members' MAC of the slots as they are now, after a change to them in this transaction.
    func resealMembersMAC() throws(VaultError) {
        try storage.setMembersMAC(cipher.membersMAC(try storage.memberSlots()))
    }
}
