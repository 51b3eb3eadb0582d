import Foundation
import Testing
@testable import VaultCore

/// The team log (format 11): each member's batches signed with their own key, every batch
/// chained to the one before, and what this machine saw remembered. Attacks by the server (rows
/// edited, deleted, reordered) and by another member (who holds the vault's key, so can seal
/// anything to the log, but not sign as someone else).
@Suite(.serialized) struct TeamLogTests {
    private let kdf = KDFPreset.interactive.parameters

    /// A vault made with the passphrase, ann and bob added with keys that sign, and each of them
    /// having logged a read of their own.
    private struct Team {
        let scratch: Scratch
        let owner: Vault
        let annKey: MemberKey
        let bobKey: MemberKey

        func asAnn() throws -> Vault { try Vault.open(at: scratch.vaultPath, member: annKey) }
        func asBob() throws -> Vault { try Vault.open(at: scratch.vaultPath, member: bobKey) }
    }

    private func member(_ scratch: Scratch, _ name: String) throws -> MemberKey {
        let file = scratch.directory + "/\(name).key"
        try MemberKey.create(at: file, passphrase: secret("pw of \(name)"), kdf: kdf)
        return try MemberKey.open(at: file, passphrase: secret("pw of \(name)"))
    }

    private func read(_ path: String, at time: Timestamp = .now()) -> AccessLogEntry {
        AccessLogEntry(time: time, pid: 4242, executable: "/usr/bin/cat", path: try! VaultPath(path), access: .read, decision: .allowed)
    }

    private func team(_ engine: StorageEngine) throws -> Team {
        let scratch = try Scratch(engine)
        let owner = try makeVault(scratch)
        try owner.store(secret("db password"), at: path("prod/db"))
        try owner.store(secret("api token"), at: path("prod/api"))
        let ann = try member(scratch, "ann"), bob = try member(scratch, "bob")
        try owner.addMember(name: "ann", publicKey: ann.publicKey)
        try owner.addMember(name: "bob", publicKey: bob.publicKey)
        let team = Team(scratch: scratch, owner: owner, annKey: ann, bobKey: bob)
        try team.asAnn().appendAccessLog([read("prod/db")])
        try team.asBob().appendAccessLog([read("prod/api")])
        return team
    }

    private func sequences(_ scratch: Scratch) throws -> [Int64] {
        try scratch.rawRows().blobs("access_log", "sealed", key: "sequence", where: "true").map(\.0)
    }

    private func sealed(_ scratch: Scratch, _ sequence: Int64) throws -> [UInt8] {
        try #require(try scratch.rawRows().blobs("access_log", "sealed", key: "sequence", where: "sequence = \(sequence)").first?.1)
    }

    @Test(arguments: StorageEngine.all)
    func eachMembersEntriesAreSignedAsThem(engine: StorageEngine) throws {
        let team = try team(engine)
        let reading = try team.owner.accessLog()
        #expect(reading.problems.isEmpty && reading.hasMembers)
        let reads = reading.entries.filter { $0.access == .read }
        #expect(reads.map { $0.member?.name } == ["ann", "bob"])
        #expect(reads.allSatisfy { $0.member?.isMember == true })
        #expect(reads.map { $0.path?.description } == ["prod/db", "prod/api"])
        // Member additions are logged too, by whoever added them (the owner: unsigned).
        #expect(reading.entries.filter { $0.access == .memberAddition }.map(\.aboutMember) == ["ann", "bob"])
        #expect(reading.entries.filter { $0.access == .memberAddition }.allSatisfy { $0.member == nil })
        // Every batch is chained: the row keeps its digest in front of the box.
        for sequence in try sequences(team.scratch) {
            #expect(AccessLogSealer.keptDigest(try sealed(team.scratch, sequence)) != nil)
        }
        #expect(try team.owner.verify().isEmpty)
    }

    /// Bob holds the vault's key, so he can seal a batch to the log; he cannot sign it as ann.
    @Test(arguments: StorageEngine.all)
    func anotherMemberCannotSignAsAnn(engine: StorageEngine) throws {
        let team = try team(engine)
        let bob = try team.asBob()
        try bob.appendingToLog(given: nil) { (storage, sealer, _, _) throws(VaultError) -> LogHead? in
            try sealer.append([read("prod/db")], to: storage, bounds: .default, signer: LogSigner(name: Array("ann".utf8), key: team.bobKey))
        }
        let reading = try team.owner.accessLog()
        #expect(reading.problems.count == 1)
        #expect(reading.problems.first?.reason.contains("claims member ann but is not signed with that member's key") == true)
        // Its entry is not shown as ann's: ann's one read is the one she signed.
        #expect(reading.entries.filter { $0.member?.name == "ann" }.count == 1)
        #expect(try team.owner.verify().contains { $0.reason.contains("forged") })
    }

    /// A batch whose entries were changed after signing (by someone holding the log's key, who
    /// seals it again, digest and all) fails its signature.
    @Test func anEditedSignedBatchFailsItsSignature() throws {
        let team = try team(.sqlite)
        let sequence = try #require(try sequences(team.scratch).last)
        let row = AccessLogRow(sequence: sequence, firstTime: 0, lastTime: 0, entries: 0, sealed: try sealed(team.scratch, sequence))
        let forged = try team.owner.withStore { (store) throws(VaultError) -> [UInt8] in
            let keys = try AccessLogKeys(cipher: store.cipher)
            guard let opened = try keys.openPlain(row) else { throw .integrityFailure("bob's batch") }
            var bytes = opened.plain.withUnsafeBytes { Array($0) }
            // The header (30), the previous digest (32), the salt (16), "bob" and his key, then the first entry: its pid.
            let pid = 30 + 32 + 16 + 1 + 3 + 32 + 8 + 4
            bytes[pid] ^= 1
            return (opened.kept ?? []) + keys.sealer.seal(secret(bytes))
        }
        try team.scratch.rawRows().setBlob("access_log", "sealed", where: "sequence = \(sequence)", forged)
        let reading = try team.owner.accessLog()
        #expect(reading.problems.map(\.reason).contains { $0.contains("signature does not hold") })
        #expect(!reading.entries.contains { $0.pid == 4242 ^ 1 })
    }

    /// The server (no key) deletes or reorders rows, or edits the digest kept in front of a box.
    @Test(arguments: StorageEngine.all)
    func deletedReorderedAndEditedBatchesAreDetected(engine: StorageEngine) throws {
        let team = try team(engine)
        for index in 0..<3 { try team.asAnn().appendAccessLog([read("prod/db"), read("prod/api\(index)")]) }
        #expect(try team.owner.accessLog().problems.isEmpty)
        let all = try sequences(team.scratch)
        let rows = try team.scratch.rawRows()

        let middle = all[all.count / 2]

        // Two batches swapped: each was sealed as the other's sequence.
        let a = try sealed(team.scratch, middle), b = try sealed(team.scratch, middle + 1)
        try rows.setBlob("access_log", "sealed", where: "sequence = \(middle)", b)
        try rows.setBlob("access_log", "sealed", where: "sequence = \(middle + 1)", a)
        #expect(try team.owner.accessLog().problems.contains { $0.reason.contains("moved or copied") })
        try rows.setBlob("access_log", "sealed", where: "sequence = \(middle)", a)
        try rows.setBlob("access_log", "sealed", where: "sequence = \(middle + 1)", b)
        #expect(try team.owner.accessLog().problems.isEmpty)

        // The digest in front edited.
        var edited = a
        edited[0] ^= 1
        try rows.setBlob("access_log", "sealed", where: "sequence = \(middle)", edited)
        #expect(try team.owner.accessLog().problems.contains { $0.reason.contains("digest was edited") })
        try rows.setBlob("access_log", "sealed", where: "sequence = \(middle)", a)
        #expect(try team.owner.accessLog().problems.isEmpty)

        // Last, as it cannot be put back with its row's clear columns: a batch in the middle
        // deleted, a gap.
        try rows.delete("access_log", where: "sequence = \(middle)")
        #expect(try team.owner.accessLog().problems.contains { $0.reason.contains("were deleted") })
    }

    /// A member (holding the log's key) replaces a batch with one of their own making, at its
    /// sequence and chained to the one before: the batch after it no longer follows.
    @Test(arguments: StorageEngine.all)
    func aReplacedBatchBreaksTheChain(engine: StorageEngine) throws {
        let team = try team(engine)
        try team.asAnn().appendAccessLog([read("prod/api")])
        let all = try sequences(team.scratch)
        let target = all[all.count - 2]
        let previous = try #require(AccessLogSealer.keptDigest(try sealed(team.scratch, target - 1)))
        // Made an hour on, so its times always differ from the batch it replaces.
        let time = Timestamp(seconds: Timestamp.now().seconds + 3600, nanoseconds: 0)
        let replacement = try team.asBob().withStore { (store) throws(VaultError) -> [UInt8] in
            let sealer = try AccessLogKeys(cipher: store.cipher).sealer
            return try AccessLogBatch.sealChained([read("prod/api", at: time)], vaultID: store.cipher.vaultID, sequence: target, previous: previous,
                                                  signer: LogSigner(name: Array("bob".utf8), key: team.bobKey), to: sealer).sealed
        }
        // The whole row, as a member writing to the server would: its clear times are the
        // replacement's.
        let rows = try team.scratch.rawRows()
        try rows.setBlob("access_log", "sealed", where: "sequence = \(target)", replacement)
        try rows.update("access_log", set: "first_time = \(time.seconds), last_time = \(time.seconds), entries = 1", where: "sequence = \(target)")
        let problems = try team.owner.accessLog().problems
        #expect(problems.contains { $0.reason.contains("does not follow batch \(target)") })
    }

    /// Deleting the newest batches leaves a log that is whole in itself: this machine, which
    /// wrote them (or read them), says so.
    @Test(arguments: StorageEngine.all)
    func theNewestBatchesDeletedAreNoticedByAMachineThatSawThem(engine: StorageEngine) throws {
        let team = try team(engine)
        #expect(try team.owner.accessLog().problems.isEmpty)
        let newest = try #require(try sequences(team.scratch).last)
        try team.scratch.rawRows().delete("access_log", where: "sequence = \(newest)")
        let problems = try team.owner.accessLog().problems
        #expect(problems.contains { $0.reason.contains("the newest batches were deleted") })
        // Batches appended since do not hide it: the one seen is not at its place, and this
        // machine's record stays on it until an older copy is accepted (--accept-rollback).
        try team.asAnn().appendAccessLog([read("prod/db")])
        #expect(try team.owner.accessLog().problems.contains { $0.reason.contains("replaced") })
        try team.asAnn().appendAccessLog([read("prod/api")])
        #expect(try team.owner.accessLog().problems.contains { $0.reason.contains("replaced") })
        let accepted = try Vault.open(at: team.scratch.vaultPath, passphrase: secret(passphrase), acceptingRollback: true)
        #expect(try accepted.accessLog().problems.isEmpty)
    }

    /// An older vault's log is chained by the upgrade, oldest first, and reads as before.
    @Test func aVersion10VaultsLogIsChainedAt11() throws {
        let scratch = Scratch()
        let vault = try makeVault(scratch)
        for index in 0..<3 { try vault.appendAccessLog([read("app/\(index)")]) }
        // Back to format 10: batches sealed the old way, the number and the header's MAC set back.
        try vault.writing { (store) throws(VaultError) in
            let keys = try AccessLogKeys(cipher: store.cipher)
            do {
                for case .row(let row) in try store.storage.accessLogBatches(since: nil, afterSequence: nil) {
                    guard case .success(let opened) = try keys.open(row) else { throw .integrityFailure("batch") }
                    let plain = try AccessLogBatch.encode(opened.entries, vaultID: store.cipher.vaultID, sequence: row.sequence)
                    try store.storage.replaceAccessLogBatch(sequence: row.sequence, sealed: keys.sealer.seal(plain))
                }
                let header = try store.storage.header()!
                try store.storage.updateHeaderMAC(store.cipher.headerMAC(itemSizeLimit: header.itemSizeLimit, oldestFormat: 10))
                try store.storage.setFormatVersion(10)
            }
        }
        for sequence in try sequences(scratch) { #expect(AccessLogSealer.keptDigest(try sealed(scratch, sequence)) == nil) }
        SeenLogHeads.forget(location: SeenGenerations.location(of: scratch.vaultPath), vaultID: try vault.withStore { $0.cipher.vaultID })
        let upgraded = try reopen(scratch)
        let version = try upgraded.withStore { (store) throws(VaultError) in try store.storage.formatVersion() }
        #expect(version == 11)
        for sequence in try sequences(scratch) { #expect(AccessLogSealer.keptDigest(try sealed(scratch, sequence)) != nil) }
        let reading = try upgraded.accessLog()
        #expect(reading.problems.isEmpty)
        #expect(reading.entries.map { $0.path?.description } == ["app/0", "app/1", "app/2"])
        try upgraded.appendAccessLog([read("app/3")])
        #expect(try upgraded.accessLog().problems.isEmpty)
    }

    /// A member key made before format 11 (X25519 alone) still opens; its batches go unsigned.
    @Test func aKeyWithoutASigningHalfLogsUnsigned() throws {
        let scratch = Scratch()
        let owner = try makeVault(scratch)
        // Tests/Fixtures/v7.member.key, made by the release before format 11, with v1.passphrase.
        let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures").path
        var phrase = Array(try Data(contentsOf: URL(fileURLWithPath: fixtures + "/v1.passphrase")))
        if phrase.last == 0x0A { phrase.removeLast() }
        let old = try MemberKey.open(at: fixtures + "/v7.member.key", passphrase: secret(phrase))
        #expect(!old.canSign && old.publicKey.base64.count == 44)
        try owner.addMember(name: "old", publicKey: old.publicKey)
        try Vault.open(at: scratch.vaultPath, member: old).appendAccessLog([read("app/x")])
        let reading = try owner.accessLog()
        #expect(reading.problems.isEmpty)
        #expect(reading.entries.last?.member == nil && reading.entries.last?.path?.description == "app/x")
    }

    /// A removed member's signed entries stay readable, named as no longer a member; the
    /// removal itself is logged, and the rotation list knows when.
    @Test(arguments: StorageEngine.all)
    func theRotationListNamesEveryItemWithTheRemovedMembersLastRead(engine: StorageEngine) throws {
        let team = try team(engine)
        let removal = try team.owner.removeMember(name: "bob", passphrase: secret(passphrase))
        #expect(removal.keptMembers == ["ann"])
        let reading = try team.owner.accessLog()
        #expect(reading.problems.isEmpty)
        let bobs = reading.entries.filter { $0.member?.name == "bob" }
        #expect(bobs.count == 1 && bobs[0].member?.isMember == false)
        #expect(reading.entries.last?.access == .memberRemoval && reading.entries.last?.aboutMember == "bob")

        try team.owner.store(secret("new db password"), at: path("prod/db"))
        let list = try team.owner.itemsToRotate(after: "bob")
        #expect(list.removed != nil && list.problems.isEmpty)
        #expect(list.items.map(\.path.description) == ["prod/api", "prod/db"])
        #expect(list.items[0].lastRead == bobs[0].time && !list.items[0].changedSinceRemoval)
        #expect(list.items[1].lastRead == nil && list.items[1].changedSinceRemoval)
    }
}
