import Foundation
import Testing
@testable import VaultCore

/// `member remove`: the slot goes and the master key is rotated, every record sealed again, in
/// one transaction; open vaults of other members follow, others lock.
@Suite(.serialized, .tags(.slow)) struct KeyRotationTests {
    private let kdf = KDFPreset.interactive.parameters

    private func member(_ scratch: Scratch, _ name: String) throws -> MemberKey {
        let file = scratch.directory + "/\(name).key"
        try MemberKey.create(at: file, passphrase: secret("pw of \(name)"), kdf: kdf)
        return try MemberKey.open(at: file, passphrase: secret("pw of \(name)"))
    }

    private func cipher(of vault: Vault) throws -> RecordCipher {
        try vault.withStore { $0.cipher }
    }

    /// A vault holding one record of every kind: items of two classes in a dictionary with a
    /// default, extended attributes, access rules, access log batches.
    private func populate(_ vault: Vault) throws {
        try vault.store(secret("deploy key canary"), at: path("team/deploy"),
                        attributes: [Attribute(name: try AttributeName("service"), value: secret("attr canary"))])
        try vault.store(secret("service canary"), at: path("team/service"), accessibility: .afterFirstUnlock)
        try vault.makeDictionary(at: path("team/empty/nested"), withIntermediates: true)
        try vault.setClass(.afterFirstUnlock, at: path("team/empty"))
        try vault.allow(AccessRule(try Principal.unit(named: "canary.service"), readOnly: true), at: path("team/deploy"))
        try vault.appendAccessLog([AccessLogEntry(pid: 42, executable: "/usr/bin/canary", node: try vault.node(at: path("team/deploy")).id,
                                                  access: .read, decision: .allowed)])
    }

    private func expectPopulated(_ vault: Vault) throws {
        #expect(try vault.read(path("team/deploy")).testBytes == Array("deploy key canary".utf8))
        #expect(try vault.read(path("team/service")).testBytes == Array("service canary".utf8))
        #expect(try vault.attribute(try AttributeName("service"), at: path("team/deploy")).testBytes == Array("attr canary".utf8))
        #expect(try vault.find([Attribute(name: try AttributeName("service"), value: secret("attr canary"))]) == [path("team/deploy")])
        #expect(try vault.effectiveDefaultClass(at: path("team/empty/nested")) == .afterFirstUnlock)
        #expect(try vault.ruleSets().map(\.path) == [path("team/deploy")])
        let log = try vault.accessLog()
        #expect(log.problems.isEmpty)
        #expect(log.entries.contains { $0.executable == "/usr/bin/canary" })
        #expect(try vault.verify().isEmpty)
    }

    /// How many of the sealed records as stored open with `old` (the header MAC counts as one).
    private func recordsOpening(with old: RecordCipher, at vaultPath: String) throws -> Int {
        let storage = try VaultLocation.openStorage(at: vaultPath)
        var places: [NodeID: RecordPlace] = [:]
        var opened = 0
        for case .row(let row, let hasContent) in try storage.everyNode() {
            let place = RecordPlace(node: row.id, incarnation: row.incarnation)
            places[row.id] = place
            if try old.openAttributes(row.sealedAttributes, place) != nil { opened += 1 }
            if row.id != .root, old.openName(row.sealedName, place, parent: row.parent) != nil { opened += 1 }
            if hasContent, let sealed = try storage.sealedContent(of: row.id) {
                for accessibility in [AccessibilityClass.whenUnlocked, .afterFirstUnlock] {
                    for generation in 0..<4 {
                        let count = AEAD.plaintextCount(ofSealed: sealed) ?? 0
                        for size in 0..<count where try old.openContent(sealed, place, generation: UInt64(generation), expectedCount: size,
                                                                         accessibility: accessibility) != nil {
                            opened += 1
                        }
                    }
                }
            }
        }
        for case .row(let row) in try storage.everyAttribute() {
            let place = places[row.node]!
            if old.openAttributeName(row.sealedName, place, tag: row.tag) != nil { opened += 1 }
            if try old.openAttributeValue(row.sealedValue, place, tag: row.tag) != nil { opened += 1 }
        }
        for row in try storage.ruleRows() where try old.openRules(row.sealed, places[row.node]!) != nil { opened += 1 }
        let logKeys = try AccessLogKeys(cipher: old)
        for case .row(let row) in try storage.accessLogBatches(since: nil, afterSequence: nil) {
            if case .success = try logKeys.open(row) { opened += 1 }
        }
        let header = try #require(try storage.header())
        if old.headerMACMatches(header.mac, itemSizeLimit: header.itemSizeLimit, oldestFormat: VaultFormat.version) { opened += 1 }
        return opened
    }

    @Test(arguments: StorageEngine.all)
    func removalResealsEveryRecordAndTheOldKeyOpensNothing(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        try populate(vault)
        let alice = try member(scratch, "alice"), bob = try member(scratch, "bob")
        try vault.addMember(name: "alice", publicKey: alice.publicKey)
        try vault.addMember(name: "bob", publicKey: bob.publicKey)
        let old = try cipher(of: vault)
        let batches = try vault.accessLogSummary().batches

        let removal = try vault.removeMember(name: "bob", passphrase: secret(passphrase))
        // 6 nodes (root, team, deploy, service, empty, nested), 2 contents, 1 attribute, 1 rule set, and the
        // log's batches (the class and rule changes logged theirs).
        #expect(batches >= 2)
        #expect(removal.recordsResealed == 6 + 2 + 1 + 1 + batches)
        #expect(removal.keptMembers == ["alice"])
        #expect(removal.keptPassphraseSlot && removal.droppedPassphraseSlots == 0)
        #expect(try cipher(of: vault) !== old)

        // The rotating vault goes on with the new key; a written canary is sealed with it.
        try expectPopulated(vault)
        try vault.store(secret("written after"), at: path("team/after"))
        try expectPopulated(try reopen(scratch))
        try expectPopulated(try Vault.open(at: scratch.vaultPath, member: alice))
        #expect(throws: VaultError.notAMember(bob.publicKey.base64)) { try Vault.open(at: scratch.vaultPath, member: bob) }
        #expect(try recordsOpening(with: old, at: scratch.vaultPath) == 0)
        // The same walk with the new key opens every one: 7 nodes (names but the root's, attributes),
        // 3 contents, 1 attribute (name, value), 1 rule set, the log's batches and the removal's, the header.
        #expect(try recordsOpening(with: try cipher(of: vault), at: scratch.vaultPath) == 7 + 6 + 3 + 2 + 1 + batches + 1 + 1)
        #expect(try reopen(scratch).read(path("team/after")).testBytes == Array("written after".utf8))
    }

    @Test(arguments: StorageEngine.all)
    func otherPassphraseSlotsAreDroppedAndAMembersRemovalDropsThemAll(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        try vault.store(secret("x"), at: path("a"))
        let alice = try member(scratch, "alice"), bob = try member(scratch, "bob"), carol = try member(scratch, "carol")
        for (name, key) in [("alice", alice), ("bob", bob), ("carol", carol)] { try vault.addMember(name: name, publicKey: key.publicKey) }
        // A second passphrase slot (shared with someone else), as an older keychainfs could hold.
        let second = try vault.withStore { (store) throws(VaultError) in
            try store.cipher.withMasterKey { (master) throws(VaultError) in
                try Vault.sealKeySlot(master: master, passphrase: secret("shared"), parameters: kdf, slotID: 2)
            }
        }
        try vault.withStorage { (storage) throws(VaultError) in try storage.write(.durable) { () throws(VaultError) in try storage.upsertKeySlot(second) } }
        _ = try reopen(scratch, with: "shared")

        let removal = try vault.removeMember(name: "carol", passphrase: secret(passphrase))
        #expect(removal.keptPassphraseSlot && removal.droppedPassphraseSlots == 1)
        #expect(throws: VaultError.wrongPassphrase) { try reopen(scratch, with: "shared") }
        _ = try reopen(scratch)

        let asAlice = try Vault.open(at: scratch.vaultPath, member: alice)
        let byMember = try asAlice.removeMember(name: "bob")
        #expect(!byMember.keptPassphraseSlot && byMember.droppedPassphraseSlots == 1)
        #expect(try asAlice.keySlots() == [.member(name: "alice", publicKey: alice.publicKey)])
        #expect(throws: VaultError.memberKeyRequired) { try reopen(scratch) }
        #expect(try Vault.open(at: scratch.vaultPath, member: alice).read(path("a")).testBytes == Array("x".utf8))
        // The last way in stays.
        #expect(throws: VaultError.noKeySlotLeft("alice")) { try asAlice.removeMember(name: "alice") }
        #expect(throws: VaultError.noSuchMember("bob")) { try asAlice.removeMember(name: "bob") }
    }

    @Test func aRotationThatFailsPartWayLeavesTheOldVault() throws {
        let scratch = Scratch()
        let vault = try makeVault(scratch)
        try populate(vault)
        let bob = try member(scratch, "bob")
        try vault.addMember(name: "bob", publicKey: bob.publicKey)
        // The access log is sealed again last, after every node, attribute and rule: a batch
        // that fails to open makes the rotation throw from inside its transaction.
        withRawDatabase(scratch.vaultPath) { db in
            let (sequence, sealed) = rawBlobs(db, "SELECT sequence, sealed FROM access_log ORDER BY sequence").last!
            var damaged = sealed
            damaged[damaged.count - 1] ^= 1
            let hex = damaged.map { String(format: "%02x", $0) }.joined()
            rawExec(db, "UPDATE access_log SET sealed = X'\(hex)' WHERE sequence = \(sequence)")
        }
        let everySealedColumn = ["SELECT id, attributes FROM nodes", "SELECT id, content FROM nodes WHERE content IS NOT NULL",
                                 "SELECT id, name FROM nodes", "SELECT id, name_tag FROM nodes", "SELECT node, tag FROM attributes",
                                 "SELECT node, value FROM attributes", "SELECT node, sealed FROM rules",
                                 "SELECT rowid, sealed_master_key FROM member_slots", "SELECT id, wrapped_master_key FROM key_slots",
                                 "SELECT singleton, header_mac FROM vault", "SELECT sequence, sealed FROM access_log"]
        let before = withRawDatabase(scratch.vaultPath) { db in everySealedColumn.map { rawBlobs(db, $0).map { "\($0.0):\($0.1)" } } }
        let refusal = #expect(throws: VaultError.self) { try vault.removeMember(name: "bob", passphrase: secret(passphrase)) }
        // Says what failed, once, and that nothing was rotated.
        let message = refusal?.description ?? ""
        #expect(message.components(separatedBy: "failed authentication").count == 2 && message.contains("access log batch")
                && message.contains("not rotated"), "\(message)")
        let after = withRawDatabase(scratch.vaultPath) { db in everySealedColumn.map { rawBlobs(db, $0).map { "\($0.0):\($0.1)" } } }
        #expect(before == after)
        #expect(before.allSatisfy { !$0.isEmpty })
        #expect(try vault.read(path("team/deploy")).testBytes == Array("deploy key canary".utf8))
        #expect(try Vault.open(at: scratch.vaultPath, member: bob).read(path("team/service")).testBytes == Array("service canary".utf8))
    }

    @Test(arguments: StorageEngine.all)
    func openVaultsFollowARotationByAnotherConnectionOrLock(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        try vault.store(secret("before"), at: path("a"))
        let pair = { Attribute(name: try! AttributeName("service"), value: secret("searched")) }
        try vault.store(secret("s"), at: path("searchable"), attributes: [pair()])
        let alice = try member(scratch, "alice"), bob = try member(scratch, "bob"), carol = try member(scratch, "carol")
        for (name, key) in [("alice", alice), ("bob", bob), ("carol", carol)] { try vault.addMember(name: name, publicKey: key.publicKey) }
        let asAlice = try Vault.open(at: scratch.vaultPath, member: alice)
        let asCarol = try Vault.open(at: scratch.vaultPath, member: carol)
        let byPassphrase = try reopen(scratch)
        let aliceLockedEarlier = try Vault.open(at: scratch.vaultPath, member: alice)
        #expect(try asAlice.read(path("a")).testBytes == Array("before".utf8))
        #expect(try asCarol.read(path("a")).testBytes == Array("before".utf8))
        #expect(try byPassphrase.read(path("a")).testBytes == Array("before".utf8))
        aliceLockedEarlier.lock()
        #expect(try aliceLockedEarlier.findLockedItems([pair()], in: nil).count == 1)
        // What a mount's log writer keeps: the log key as it was when the mount started.
        let keptSealer = try asAlice.accessLogSealer()

        _ = try Vault.open(at: scratch.vaultPath, member: bob).removeMember(name: "carol")

        // Alice's open vault takes the new key by itself, for reads and writes.
        #expect(try asAlice.read(path("a")).testBytes == Array("before".utf8))
        try asAlice.store(secret("after"), at: path("b"))
        #expect(!asAlice.isLocked && !asAlice.wasShutOutByRotation)
        #expect(try Vault.open(at: scratch.vaultPath, member: bob).read(path("b")).testBytes == Array("after".utf8))
        // Its kept log sealer is swapped for the new key's: the team reads the batch, sealed to no old key.
        try asAlice.appendAccessLog([AccessLogEntry(pid: 7, executable: "/usr/bin/after-rotation", access: .read, decision: .allowed)],
                                    sealer: keptSealer)
        let log = try Vault.open(at: scratch.vaultPath, member: bob).accessLog()
        #expect(log.problems.isEmpty && log.entries.contains { $0.executable == "/usr/bin/after-rotation" })
        // Carol was removed, and the passphrase slot was dropped (bob removed carol): both lock.
        #expect(throws: VaultError.locked) { try asCarol.read(path("a")) }
        #expect(asCarol.isLocked && asCarol.wasShutOutByRotation)
        #expect(throws: VaultError.locked) { try byPassphrase.store(secret("x"), at: path("c")) }
        #expect(byPassphrase.wasShutOutByRotation)
        // Locked at the time, alice's other vault has no member key to follow with: it stays locked.
        #expect(throws: VaultError.locked) { try aliceLockedEarlier.read(path("a")) }
        // Nor does its kept search key answer: the tags it computes are gone.
        #expect(throws: VaultError.locked) { try aliceLockedEarlier.findLockedItems([pair()], in: nil) }
        // Nothing is logged by a vault shut out (it would be sealed to the old log key).
        #expect(throws: VaultError.locked) {
            try asCarol.appendAccessLog([AccessLogEntry(pid: 1, node: nil, access: .read, decision: .allowed)])
        }
    }

    @Test(arguments: StorageEngine.all)
    func twoRemovalsFromTwoOpenVaultsBothRotate(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let names = ["alice", "bob", "carol", "dave"]
        let keys = try names.map { try member(scratch, $0) }
        let vault = try Vault.create(at: scratch.vaultPath, member: keys[0], name: "alice")
        try vault.store(secret("kept"), at: path("x"))
        for (name, key) in zip(names, keys).dropFirst() { try vault.addMember(name: name, publicKey: key.publicKey) }
        let asAlice = try Vault.open(at: scratch.vaultPath, member: keys[0])
        let asBob = try Vault.open(at: scratch.vaultPath, member: keys[1])
        _ = try asBob.removeMember(name: "carol")
        // Alice's vault has not looked since: it follows bob's rotation, then rotates again.
        let second = try asAlice.removeMember(name: "dave")
        #expect(second.keptMembers == ["alice", "bob"])
        #expect(try asBob.read(path("x")).testBytes == Array("kept".utf8))
        #expect(try Vault.open(at: scratch.vaultPath, member: keys[1]).verify().isEmpty)
        for gone in keys[2...] {
            #expect(throws: VaultError.notAMember(gone.publicKey.base64)) { try Vault.open(at: scratch.vaultPath, member: gone) }
        }
        // Bob removes himself: his vault keeps nothing of the new key.
        _ = try asBob.removeMember(name: "bob")
        #expect(asBob.isLocked && asBob.wasShutOutByRotation)
        #expect(throws: VaultError.locked) { try asBob.read(path("x")) }
        #expect(try asAlice.read(path("x")).testBytes == Array("kept".utf8))
    }

    @Test(arguments: StorageEngine.all)
    func aTeamVaultMadeByAMemberHasNoPassphraseSlot(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let alice = try member(scratch, "alice")
        let vault = try Vault.create(at: scratch.vaultPath, member: alice, name: "alice")
        try vault.store(secret("team"), at: path("x"))
        #expect(try vault.keySlots() == [.member(name: "alice", publicKey: alice.publicKey)])
        #expect(throws: VaultError.memberKeyRequired) { try reopen(scratch) }
        #expect(try Vault.open(at: scratch.vaultPath, member: alice).read(path("x")).testBytes == Array("team".utf8))
        #expect(throws: VaultError.noKeySlotLeft("alice")) { try vault.removeMember(name: "alice") }
        #expect(try vault.verify().isEmpty)
    }

    @Test(arguments: StorageEngine.all)
    func thisDeviceOnlyIsRefusedInAVaultWithMembers(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        setenv("KEYCHAINFS_HOST_KEY", scratch.directory + "/host.key", 1)
        defer { unsetenv("KEYCHAINFS_HOST_KEY") }
        let vault = try makeVault(scratch)
        try vault.store(secret("local"), at: path("d/local"), accessibility: .thisDeviceOnly)
        try vault.setClass(.thisDeviceOnly, at: path("d"))
        let alice = try member(scratch, "alice")
        let refusal = #expect(throws: VaultError.self) { try vault.addMember(name: "alice", publicKey: alice.publicKey) }
        #expect(refusal?.description.contains("1 this-device-only item(s) and 1 dictionary default(s)") == true)
        try vault.setClass(.whenUnlocked, at: path("d/local"))
        #expect(throws: VaultError.self) { try vault.addMember(name: "alice", publicKey: alice.publicKey) }
        try vault.setClass(nil, at: path("d"))
        try vault.addMember(name: "alice", publicKey: alice.publicKey)

        for attempt in [{ try vault.setClass(.thisDeviceOnly, at: path("d/local")) },
                        { try vault.setClass(.thisDeviceOnly, at: path("d")) },
                        { try vault.store(secret("new"), at: path("d/new"), accessibility: .thisDeviceOnly) }] as [() throws -> Void] {
            let refused = #expect(throws: VaultError.self) { try attempt() }
            #expect(refused?.description.contains("this-device-only is not allowed in a vault with members") == true)
        }
        #expect(try vault.node(at: path("d/local")).attributes.accessibility == .whenUnlocked)
        #expect(try vault.list(path("d")).count == 1)
        try vault.setClass(.afterFirstUnlock, at: path("d/local"))
    }
}
