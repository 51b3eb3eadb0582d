/// The vault format, whatever stores it. The version names the layout of the records (and,
/// with it, the tables a storage keeps); `FormatUpgrade` brings older vaults to it in place.
package enum VaultFormat {
    /// 2: attributes records of layout 2 (access time, number of subdictionaries).
    /// 3: a node's own attributes (extended attributes), records of their own.
    /// 4: access rules (a sealed record per ruled node and a MAC over all of them), the access
    ///    log (sealed batches) and accessibility classes (attributes records of layout 3; older
    ///    ones still read).
    /// 5: item properties (`ItemProperty`), attributes under reserved names that format 4 code
    ///    would report as damage: the records do not change, the number does, so such code
    ///    refuses the vault as newer instead.
    /// 6: members' key slots (the master key sealed to a member's public key), a table of
    ///    their own; format 5 code would ignore them, so the number changes.
    /// 7: each member slot ends in a MAC of its binding under a subkey of the master key, so a
    ///    slot written into the tables by someone without the key gets nothing at a rotation;
    ///    format 6 code would take such slots for damage.
    /// 8: the vault's row holds a generation that every write raises, the MAC over the member
    ///    slots and a MAC binding the generation, the header's MAC, the rules' MAC and the
    ///    members' MAC together (`VaultState`): rules or member rows put back from an older copy
    ///    no longer match, and each machine refuses a generation older than it saw
    ///    (`SeenGenerations`). Format 7 code would not raise the generation.
    /// 9: an item larger than `contentBlockBytes` keeps its content in blocks of that size, rows
    ///    of their own, and its node's content record holds the map of their generations, so a
    ///    write stores the blocks it changed and an open reads the blocks it needs. Smaller items
    ///    are stored whole as before; format 8 records of larger ones still read, and take blocks
    ///    at their next write. Format 8 code would take a map for damage.
    /// 10: a table of TPM PIN slots (`PINSlotRow`): format 8 code would not know the vault opens
    ///    with one, nor refuse members beside it.
    /// 11: the team log. Access log batches are chained (each names the digest of the one before)
    ///    and, when a member who can sign wrote them, signed with the member's Ed25519 key; member
    ///    public keys may carry that key (64 bytes: X25519 then Ed25519). No table changes; format
    ///    10 code would take a 64-byte member key or a chained batch for damage.
    package static let version = 11
    /// The version from which the header's MAC binds the format version (see
    /// `RecordCipher.headerMAC`): a vault whose MAC binds a version is never read as an older one.
    package static let oldestSealedVersion = 4
    /// The versions a header's MAC may bind, one of which it binds from `oldestSealedVersion` on.
    package static let sealedVersions = oldestSealedVersion ... version
    /// The oldest version this code upgrades from.
    package static let oldestUpgradable = 1
    /// The first version with members' key slots.
    package static let oldestWithMembers = 6
    /// The first version whose member slots carry a MAC (`MemberSlot`).
    package static let oldestWithMemberSlotMACs = 7
    /// The first version with a sealed generation (`VaultState`).
    package static let oldestWithGeneration = 8
    /// A content block's plaintext: with the AEAD's nonce and tag and SQLite's row header it
    /// still fits one 4 KiB page, and its locked copy one pooled slot (`SecureMemory`).
    package static let contentBlockBytes = 4000
    /// The first version with TPM PIN slots.
    package static let oldestWithPINSlots = 10
    /// The first version whose access log batches are chained, and may be signed (`AccessLogBatch`).
    package static let oldestWithChainedLog = 11
    /// "KCFS": SQLite stores it as its application_id, and the header MAC binds it.
    package static let applicationID: Int32 = 0x4B43_4653

    package static let vaultIDBytes = 16
    package static let defaultItemSizeLimit = 1 << 20
    /// A node's attributes, names and values counted together: what one node may hold
    /// (`Vault.maximumAttributeBytesPerNode`, which `VaultError` names).
    package static let maximumAttributeBytesPerNode = 256 << 10
}
