/// This-device-only items never live in a team vault (one with a member slot): their content
/// opens only with one machine's host key, so the other members, and every other machine of
/// the same member, would hold an item they cannot read, and a rotation run elsewhere could
/// not seal it again.
extension NodeStore {
    /// Whether the vault has a member slot.
    func isTeamVault() throws(VaultError) -> Bool {
        guard try storage.formatVersion() >= VaultFormat.oldestWithMembers else { return false }
        return try !storage.memberSlots().isEmpty
    }

    /// Refuses `accessibility` for `what` (an item, or a dictionary's default) in a team vault.
    func checkClassAllowed(_ accessibility: AccessibilityClass?, for what: String) throws(VaultError) {
        guard accessibility == .thisDeviceOnly, try isTeamVault() else { return }
        throw .thisDeviceOnlyInTeamVault("\(what): this-device-only is not allowed in a vault with members "
            + "(their other machines could not read it); use when-unlocked or after-first-unlock")
    }

    /// How many items are this-device-only and how many dictionaries have it as their default.
    func thisDeviceOnlyCounts() throws(VaultError) -> (items: Int, defaults: Int) {
        var items = 0
        var defaults = 0
        for stored in try storage.everyNode() {
            guard case .row(let row, _) = stored else { throw .integrityFailure("a node record") }
            let place = RecordPlace(node: row.id, incarnation: row.incarnation)
            guard let attributes = try cipher.openAttributes(row.sealedAttributes, place), attributes.kind.rawValue == row.kind else {
                throw .integrityFailure(describe(row.id))
            }
            if attributes.kind == .item && attributes.accessibility == .thisDeviceOnly { items += 1 }
            if attributes.kind == .dictionary && attributes.defaultClass == .thisDeviceOnly { defaults += 1 }
        }
        return (items, defaults)
    }
}
