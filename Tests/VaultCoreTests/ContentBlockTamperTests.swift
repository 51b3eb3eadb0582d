import Foundation
import Testing
import TestSupport
@testable import VaultCore

/// Format 9: a large item's content in blocks of their own rows, each bound to its item, its
/// index and its generation, and the map of generations bound to the item's content version.
/// Every edit an attacker with the file (or a database login) can make to the blocks is an
/// integrity failure, never other plaintext; verify names it. Storage contract: every engine.
@Suite(.tags(.slow)) struct ContentBlockTamperTests {
    static let blockBytes = VaultFormat.contentBlockBytes

    private func bytes(_ count: Int, _ seed: UInt8) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) ^ seed } }

    private func blockRows(_ raw: any RawRows, of node: Int64) throws -> [(Int64, [UInt8]?)] {
        try raw.blobs("content_blocks", "sealed", key: "idx", where: "node = \(node)")
    }

    @Test(arguments: StorageEngine.all)
    func aLargeItemTakesBlocksAndASmallOneStaysWhole(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let large = bytes(2 * ContentBlockTamperTests.blockBytes + 17, 1)
        try vault.store(secret(large), at: path("big"))
        let id = try vault.node(at: path("big")).id.rawValue
        let raw = try scratch.rawRows()
        let rows = try blockRows(raw, of: id)
        #expect(rows.map(\.0) == [0, 1, 2])
        // Full blocks carry a block each; the last is padded to its bucket (64 for 17 bytes).
        #expect(rows.map { $0.1?.count ?? 0 } == [4040, 4040, 104])
        #expect(try vault.read(path("big")).testBytes == large)

        try vault.store(secret(Array("small".utf8)), at: path("big"))
        #expect(try blockRows(raw, of: id).isEmpty)
        #expect(try vault.read(path("big")).testBytes == Array("small".utf8))
        try vault.store(secret(large), at: path("big"))
        try vault.remove(path("big"), recursive: false)
        #expect(try blockRows(raw, of: id).isEmpty)
        #expect(try vault.verify().isEmpty)
    }

    /// One fresh vault per edit: `big` and `other` each of three blocks.
    @Test(arguments: StorageEngine.all, ["flip", "swap", "delete", "fromOther", "olderBlock", "olderMap", "truncatedMap"])
    func anEditedBlockIsAnIntegrityFailure(engine: StorageEngine, edit: String) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let size = 2 * ContentBlockTamperTests.blockBytes + 500
        try vault.store(secret(bytes(size, 1)), at: path("big"))
        try vault.store(secret(bytes(size, 2)), at: path("other"))
        let big = try vault.node(at: path("big")).id.rawValue
        let other = try vault.node(at: path("other")).id.rawValue
        let raw = try scratch.rawRows()
        let blocks = try blockRows(raw, of: big)
        switch edit {
        case "flip":
            var sealed = blocks[1].1!
            sealed[sealed.count / 2] ^= 1
            try raw.setBlob("content_blocks", "sealed", where: "node = \(big) AND idx = 1", sealed)
        case "swap":
            try raw.setBlob("content_blocks", "sealed", where: "node = \(big) AND idx = 0", blocks[1].1!)
            try raw.setBlob("content_blocks", "sealed", where: "node = \(big) AND idx = 1", blocks[0].1!)
        case "delete":
            try raw.delete("content_blocks", where: "node = \(big) AND idx = 1")
        case "fromOther":
            let theirs = try blockRows(raw, of: other)
            try raw.setBlob("content_blocks", "sealed", where: "node = \(big) AND idx = 0", theirs[0].1!)
        case "olderBlock":
            // The same item's block 1 as it was before the last store: its generation is older.
            try vault.store(secret(bytes(size, 3)), at: path("big"))
            try raw.setBlob("content_blocks", "sealed", where: "node = \(big) AND idx = 1", blocks[1].1!)
        case "olderMap":
            let map = try raw.blob("nodes", "content", id: big)
            try vault.store(secret(bytes(size, 3)), at: path("big"))
            try raw.setBlob("nodes", "content", id: big, map)
        default:
            let map = try raw.blob("nodes", "content", id: big)!
            try raw.setBlob("nodes", "content", id: big, Array(map.dropLast(8)))
        }
        let reopened = try reopen(scratch)
        #expect(throws: VaultError.self) { try reopened.read(path("big")) }
        do {
            _ = try reopened.read(path("big"))
        } catch .integrityFailure {
        } catch {
            Issue.record("\(edit): \(error), not an integrity failure")
        }
        #expect(try reopened.read(path("other")).testBytes == bytes(size, 2))
        let problems = try reopened.verify()
        #expect(problems.contains { $0.reason == "content failed authentication" }, "\(edit): \(problems)")
    }

    /// A block row of no item changes no content, but no removal leaves one: verify says so.
    @Test(arguments: StorageEngine.all)
    func aBlockOfNoItemIsNamedByVerify(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        try vault.store(secret(bytes(3 * ContentBlockTamperTests.blockBytes, 4)), at: path("big"))
        let big = try vault.node(at: path("big")).id.rawValue
        try scratch.rawRows().insertCopies("content_blocks", setting: "node", to: 999_999, keeping: ["idx", "sealed"],
                                           where: "node = \(big) AND idx = 0")
        #expect(try vault.read(path("big")).testBytes == bytes(3 * ContentBlockTamperTests.blockBytes, 4))
        #expect(try vault.verify().map(\.reason) == ["1 content blocks belong to no item"])
    }

    /// A member's removal rotates the master key: every block is sealed again under the new
    /// keys at its generation, and the map with them; the old keys open none of them.
    @Test(arguments: StorageEngine.all)
    func aRotationSealsEveryBlockAgain(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let file = scratch.directory + "/bob.key"
        try MemberKey.create(at: file, passphrase: secret("pw of bob"), kdf: KDFPreset.interactive.parameters)
        try vault.addMember(name: "bob", publicKey: try MemberKey.open(at: file, passphrase: secret("pw of bob")).publicKey)
        let content = bytes(5 * ContentBlockTamperTests.blockBytes + 1, 5)
        try vault.store(secret(content), at: path("big"))
        let id = try vault.node(at: path("big")).id
        let record = try vault.withStore { (store) throws(VaultError) in try store.existingRecord(id) }
        let old = try vault.withStore { $0.cipher }
        let raw = try scratch.rawRows()
        let before = try blockRows(raw, of: record.id.rawValue).map(\.1)
        _ = try vault.removeMember(name: "bob", passphrase: secret(passphrase))
        let after = try blockRows(raw, of: record.id.rawValue)
        #expect(after.count == before.count && zip(before, after.map(\.1)).allSatisfy { $0 != $1 })
        for (index, sealed) in after {
            var block = try SecureBuffer(capacity: ContentBlockTamperTests.blockBytes)
            #expect(try !old.openBlock(sealed!, index: Int(index), record.place, generation: record.attributes.contentGeneration,
                                       accessibility: .whenUnlocked, into: &block))
        }
        #expect(try reopen(scratch).read(path("big")).testBytes == content)
        #expect(try reopen(scratch).verify().isEmpty)
    }
}
