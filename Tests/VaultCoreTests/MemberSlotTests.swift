import Foundation
import Testing
@testable import VaultCore

/// Members' key slots: the master key sealed to a member's public key.
@Suite struct MemberSlotTests {
    private let kdf = KDFPreset.interactive.parameters

    private func member(_ scratch: Scratch, _ name: String) throws -> MemberKey {
        let file = scratch.directory + "/\(name).key"
        try MemberKey.create(at: file, passphrase: secret("pw of \(name)"), kdf: kdf)
        return try MemberKey.open(at: file, passphrase: secret("pw of \(name)"))
    }

    @Test(arguments: StorageEngine.all)
    func anAddedMemberOpensTheVaultAndAddsAnother(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        _ = try vault.store(secret("team secret"), at: path("deploy/key"))
        let alice = try member(scratch, "alice"), bob = try member(scratch, "bob")
        #expect(throws: VaultError.notAMember(alice.publicKey.base64)) { try Vault.open(at: scratch.vaultPath, member: alice) }

        try vault.addMember(name: "alice", publicKey: alice.publicKey)
        let asAlice = try Vault.open(at: scratch.vaultPath, member: alice)
        #expect(try asAlice.read(path("deploy/key")).testBytes == Array("team secret".utf8))
        try asAlice.addMember(name: "bob", publicKey: bob.publicKey)
        let asBob = try Vault.open(at: scratch.vaultPath, member: bob)
        #expect(try asBob.read(path("deploy/key")).testBytes == Array("team secret".utf8))
        #expect(try asBob.keySlots() == [.passphrase(id: 1), .member(name: "alice", publicKey: alice.publicKey),
                                         .member(name: "bob", publicKey: bob.publicKey)])
        // A member has no passphrase slot to change.
        #expect(throws: VaultError.self) { try asBob.changePassphrase(to: secret("new")) }
        #expect(try asBob.verify().isEmpty)
    }

    @Test(arguments: StorageEngine.all)
    func namesAndKeysAreUnique(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let alice = try member(scratch, "alice"), bob = try member(scratch, "bob")
        try vault.addMember(name: "alice", publicKey: alice.publicKey)
        #expect(throws: VaultError.self) { try vault.addMember(name: "alice", publicKey: bob.publicKey) }
        #expect(throws: VaultError.self) { try vault.addMember(name: "alice2", publicKey: alice.publicKey) }
        #expect(throws: VaultError.self) { try vault.addMember(name: "", publicKey: bob.publicKey) }
        #expect(throws: VaultError.self) { try vault.addMember(name: "b\nob", publicKey: bob.publicKey) }
        #expect(try vault.keySlots().count == 2)
    }

    @Test(arguments: StorageEngine.all)
    func aRemovedMemberNoLongerOpensTheVault(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let alice = try member(scratch, "alice")
        try vault.addMember(name: "alice", publicKey: alice.publicKey)
        _ = try Vault.open(at: scratch.vaultPath, member: alice)
        _ = try vault.removeMember(name: "alice", passphrase: secret(passphrase))
        #expect(throws: VaultError.notAMember(alice.publicKey.base64)) { try Vault.open(at: scratch.vaultPath, member: alice) }
        #expect(throws: VaultError.noSuchMember("alice")) { try vault.removeMember(name: "alice", passphrase: secret(passphrase)) }
        #expect(try vault.keySlots() == [.passphrase(id: 1)])
    }

    /// The slot binds the vault id, the name and the key: copied to another vault (whose
    /// passphrase holders did not add the member) or renamed (to a name of the same length,
    /// so the box opens and the binding is what fails), it fails as tampered.
    @Test func aSlotCopiedToAnotherVaultOrRenamedFails() throws {
        let one = Scratch(), two = Scratch()
        let vault = try makeVault(one)
        _ = try makeVault(two)
        let alice = try member(one, "alice")
        try vault.addMember(name: "alice", publicKey: alice.publicKey)
        let row = withRawDatabase(one.vaultPath) { rawBlobs($0, "SELECT 1, sealed_master_key FROM member_slots") }.first!.1
        withRawDatabase(two.vaultPath) { db in
            rawExec(db, "INSERT INTO member_slots VALUES (CAST('alice' AS BLOB), x'\(hex(alice.publicKey.bytes))', x'\(hex(row))')")
        }
        #expect(throws: VaultError.integrityFailure("member slot alice (bound to another vault, name or key)")) {
            try Vault.open(at: two.vaultPath, member: alice)
        }

        withRawDatabase(one.vaultPath) { rawExec($0, "UPDATE member_slots SET name = CAST('carol' AS BLOB)") }
        #expect(throws: VaultError.integrityFailure("member slot carol (bound to another vault, name or key)")) {
            try Vault.open(at: one.vaultPath, member: alice)
        }
    }

    /// Another member's key put on the slot: the box is not theirs to open.
    @Test func aSlotGivenAnotherKeyFails() throws {
        let scratch = Scratch()
        let vault = try makeVault(scratch)
        let alice = try member(scratch, "alice"), mallory = try member(scratch, "mallory")
        try vault.addMember(name: "alice", publicKey: alice.publicKey)
        withRawDatabase(scratch.vaultPath) { rawExec($0, "UPDATE member_slots SET public_key = x'\(hex(mallory.publicKey.bytes))'") }
        #expect(throws: VaultError.integrityFailure("member slot alice")) { try Vault.open(at: scratch.vaultPath, member: mallory) }
        #expect(throws: VaultError.notAMember(alice.publicKey.base64)) { try Vault.open(at: scratch.vaultPath, member: alice) }
    }

    /// Opened through its key file, a member's vault unlocks with that key's passphrase.
    @Test(arguments: StorageEngine.all)
    func aMembersVaultUnlocksWithTheMembersPassphrase(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        _ = try vault.store(secret("team secret"), at: path("deploy/key"))
        let keyFile = scratch.directory + "/alice.key"
        let key = try MemberKey.create(at: keyFile, passphrase: secret("alice pw"), kdf: kdf)
        try vault.addMember(name: "alice", publicKey: key)
        let asAlice = try Vault.open(at: scratch.vaultPath, memberKeyAt: keyFile, passphrase: secret("alice pw"))
        asAlice.lock()
        #expect(throws: VaultError.locked) { try asAlice.read(path("deploy/key")) }
        #expect(throws: VaultError.wrongPassphrase) { try asAlice.unlock(passphrase: secret(passphrase)) }
        try asAlice.unlock(passphrase: secret("alice pw"))
        #expect(try asAlice.read(path("deploy/key")).testBytes == Array("team secret".utf8))
    }

    private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
}
