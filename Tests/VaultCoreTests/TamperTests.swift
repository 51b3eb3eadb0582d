import CSQLite
import Foundation
import Testing
import TestSupport
@testable import VaultCore

/// Reads everything reachable; every read must give the original bytes or an integrity failure.
/// Returns whether any integrity failure was seen.
private func walkEverything(_ vault: Vault, expected: [String: [UInt8]]) -> Bool {
    var sawIntegrityFailure = false
    func visit(_ dir: VaultPath) {
        do {
            _ = try vault.node(at: dir)  // the dictionary's own attributes, as stat would
            for entry in try vault.list(dir) {
                let child = dir.appending(entry.name)
                if entry.node.kind == .dictionary { visit(child) }
            }
        } catch .integrityFailure {
            sawIntegrityFailure = true
        } catch {
            Issue.record("listing \(dir) failed with \(error), not an integrity failure")
        }
    }
    visit(.root)
    for (itemPath, bytes) in expected {
        do {
            let content = try vault.read(path(itemPath))
            #expect(content.testBytes == bytes, "wrong plaintext returned for \(itemPath)")
        } catch .integrityFailure {
            sawIntegrityFailure = true
        } catch {
            Issue.record("reading \(itemPath) failed with \(error), not an integrity failure")
        }
    }
    return sawIntegrityFailure
}

/// Storage contract: each case runs on every engine (`StorageEngine.all`), its rows reached
/// through the engine's one raw way (`RawRows`), as an attacker with the file or a database
/// login would edit them.
@Suite(.tags(.slow)) struct TamperTests {
    let items: [String: [UInt8]] = [
        "app/token": Array("token-value".utf8),
        "app/pw": Array("password-value-longer".utf8),
        "db/nested/key": Array(repeating: 0x42, count: 300),
        "top": [],
    ]

    private func makePopulated(_ scratch: Scratch) throws -> Vault {
        let vault = try makeVault(scratch)
        for (itemPath, bytes) in items { try vault.store(secret(bytes), at: path(itemPath)) }
        return vault
    }

    @Test(arguments: StorageEngine.all, ["name", "attributes", "content"])
    func flippedBitInAnyRecordIsAnIntegrityFailure(engine: StorageEngine, column: String) throws {
        let scratch = try Scratch(engine)
        _ = try makePopulated(scratch)
        let raw = try scratch.rawRows()
        let rows = try raw.blobs("nodes", column, where: "\(column) IS NOT NULL AND length(\(column)) > 0")
        #expect(rows.count >= 4)
        for case let (id, original?) in rows {
            for offset in [0, 23, 24, original.count / 2, original.count - 1] {
                var damaged = original
                damaged[offset] ^= 0x01 << UInt8(offset % 8)
                try raw.setBlob("nodes", column, id: id, damaged)
                let vault = try reopen(scratch)
                let problems = try vault.verify()
                #expect(!problems.isEmpty, "flip in \(column) of row \(id) at \(offset) went unnoticed by verify")
                #expect(walkEverything(vault, expected: items), "flip in \(column) of row \(id) at \(offset) went unnoticed by reads")
                try raw.setBlob("nodes", column, id: id, original)
            }
        }
        #expect(try reopen(scratch).verify().isEmpty)
    }

    @Test(arguments: StorageEngine.all, ["name", "attributes", "content"])
    func swappedCiphertextsBetweenRowsAreIntegrityFailures(engine: StorageEngine, column: String) throws {
        let scratch = try Scratch(engine)
        _ = try makePopulated(scratch)
        let token = try reopen(scratch).node(at: path("app/token")).id.rawValue
        let pw = try reopen(scratch).node(at: path("app/pw")).id.rawValue
        let raw = try scratch.rawRows()
        let a = try raw.blob("nodes", column, id: token)
        let b = try raw.blob("nodes", column, id: pw)
        try raw.setBlob("nodes", column, id: token, b)
        try raw.setBlob("nodes", column, id: pw, a)
        let vault = try reopen(scratch)
        let problems = try vault.verify()
        #expect(problems.count >= 2)
        #expect(problems.contains { $0.path.contains("app") })
        #expect(walkEverything(vault, expected: items))
        #expect(throws: VaultError.self) { try vault.read(path("app/token")) }
        #expect(throws: VaultError.self) { try vault.read(path("app/pw")) }
    }

    /// The daemon's open reads a row and its content in one statement (`Vault.item`): the
    /// content must still be authenticated against that row's place, version and kind.
    @Test(arguments: StorageEngine.all)
    func openByNodeRejectsAnotherRowsOrAnOlderOrAMissingContent(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makePopulated(scratch)
        let token = try vault.node(at: path("app/token")).id
        let pw = try vault.node(at: path("app/pw")).id
        let app = try vault.node(at: path("app")).id
        #expect(try vault.item(token).content.testBytes == Array("token-value".utf8))
        func expectIntegrityFailure(_ id: NodeID, _ what: String) throws {
            let reopened = try reopen(scratch)
            do throws(VaultError) {
                _ = try reopened.item(id)
                Issue.record("\(what) was served")
            } catch .integrityFailure {
            } catch {
                Issue.record("\(what) failed with \(error), not an integrity failure")
            }
        }
        let raw = try scratch.rawRows()
        let original = try raw.blob("nodes", "content", id: token.rawValue)
        let other = try raw.blob("nodes", "content", id: pw.rawValue)
        try raw.setBlob("nodes", "content", id: token.rawValue, other)
        try expectIntegrityFailure(token, "another row's content")
        try raw.setBlob("nodes", "content", id: token.rawValue, original)
        try vault.store(secret("newer-token"), at: path("app/token"))
        try raw.setBlob("nodes", "content", id: token.rawValue, original)
        try expectIntegrityFailure(token, "an older content of the row")
        try raw.setBlob("nodes", "content", id: token.rawValue, nil)
        try expectIntegrityFailure(token, "an item without content")
        #expect(throws: VaultError.isADictionary("node \(app)")) { try reopen(scratch).item(app) }
        #expect(throws: VaultError.notFound("node \(NodeID(999_999))")) { try reopen(scratch).item(NodeID(999_999)) }
    }

    @Test(arguments: StorageEngine.all)
    func rowMovedToAnotherDictionaryIsReported(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makePopulated(scratch)
        let token = try vault.node(at: path("app/token")).id.rawValue
        let db = try vault.node(at: path("db")).id.rawValue
        try scratch.rawRows().update("nodes", set: "parent = \(db)", where: "id = \(token)")
        let reopened = try reopen(scratch)
        #expect(try reopened.verify().contains { $0.reason == "name failed authentication" })
        #expect(throws: VaultError.self) { try reopened.list(path("db")) }
    }

    @Test(arguments: StorageEngine.all)
    func olderContentOfTheSameRowIsRejected(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makePopulated(scratch)
        let id = try vault.node(at: path("app/token")).id.rawValue
        let raw = try scratch.rawRows()
        let old = try raw.blob("nodes", "content", id: id)
        try vault.store(secret("newer-token"), at: path("app/token"))
        try raw.setBlob("nodes", "content", id: id, old)
        #expect(throws: VaultError.integrityFailure("app/token")) { try reopen(scratch).read(path("app/token")) }
    }

    @Test(arguments: StorageEngine.all)
    func recordsOfADeletedNodeCannotPassForANewOneAfterRewindingTheCounter(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makePopulated(scratch)
        let victim = try vault.node(at: path("top")).id.rawValue
        let raw = try scratch.rawRows()
        let saved = (try raw.blob("nodes", "attributes", id: victim), try raw.blob("nodes", "content", id: victim))
        try vault.remove(path("top"), recursive: false)
        try raw.updateVaultRow(set: "next_node_id = \(victim)")
        let reopened = try reopen(scratch)
        let other = try reopened.store(secret("different-secret"), at: path("other"))
        #expect(other.id.rawValue == victim)
        try raw.setBlob("nodes", "attributes", id: victim, saved.0)
        try raw.setBlob("nodes", "content", id: victim, saved.1)
        let attacked = try reopen(scratch)
        #expect(throws: VaultError.integrityFailure("other")) { try attacked.read(path("other")) }
        #expect(!(try attacked.verify().isEmpty))
    }

    @Test(arguments: StorageEngine.all)
    func editedKindColumnIsAnIntegrityFailureAndDeletesNothing(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makePopulated(scratch)
        let app = try vault.node(at: path("app")).id.rawValue
        let token = try vault.node(at: path("app/token")).id.rawValue
        let raw = try scratch.rawRows()
        try raw.update("nodes", set: "kind = 2", where: "id = \(app)")
        var attacked = try reopen(scratch)
        #expect(throws: VaultError.self) { try attacked.remove(path("app"), recursive: false) }
        try raw.update("nodes", set: "kind = 2", where: "id = \(app)")
        #expect(try raw.blobs("nodes", "name", where: "parent = \(app)").count == 2)
        try raw.update("nodes", set: "kind = 1", where: "id = \(app) OR id = \(token)")
        attacked = try reopen(scratch)
        #expect(throws: VaultError.integrityFailure("app/token")) { try attacked.read(path("app/token")) }
        #expect(throws: VaultError.self) { try attacked.list(path("app/token")) }
    }

    @Test(arguments: StorageEngine.all)
    func deletedRowIsReportedByVerifyAndListing(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makePopulated(scratch)
        let token = try vault.node(at: path("app/token")).id.rawValue
        try scratch.rawRows().delete("nodes", where: "id = \(token)")
        let attacked = try reopen(scratch)
        #expect(try attacked.verify().contains { $0.path == "app" && $0.reason.contains("entries recorded") })
        #expect(throws: VaultError.self) { try attacked.list(path("app")) }
        #expect(try attacked.read(path("app/pw")).testBytes == items["app/pw"])
    }

    @Test(arguments: StorageEngine.all)
    func editedVaultIDOrMissingSlotsAreIntegrityFailuresAndHugeCostsAreRefused(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        _ = try makePopulated(scratch)
        let raw = try scratch.rawRows()
        var edited = try #require(try raw.vaultBlob("vault_id"))
        edited[0] ^= 1
        try raw.setVaultBlob("vault_id", edited)
        #expect(throws: VaultError.integrityFailure("vault header")) { try reopen(scratch) }

        let slotless = try Scratch(engine)
        _ = try makePopulated(slotless)
        let slots = try slotless.rawRows()
        try slots.update("key_slots", set: "kdf_opslimit = 4294967295", where: "true")
        #expect(throws: VaultError.integrityFailure("key slot (implausible key-derivation parameters)")) { try reopen(slotless) }
        try slots.delete("key_slots", where: "true")
        #expect(throws: VaultError.integrityFailure("key slots (none left)")) { try reopen(slotless) }
    }

    @Test(arguments: StorageEngine.all)
    func editedHeaderIsAnIntegrityFailure(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        _ = try makePopulated(scratch)
        try scratch.rawRows().updateVaultRow(set: "item_size_limit = 2000000")
        #expect(throws: VaultError.integrityFailure("vault header")) { try reopen(scratch) }
    }

    @Test(arguments: StorageEngine.all)
    func damagedKeySlotFailsToUnlock(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        _ = try makePopulated(scratch)
        let raw = try scratch.rawRows()
        var wrapped = try #require(try raw.blob("key_slots", "wrapped_master_key", id: 1))
        wrapped[30] ^= 0x10
        try raw.setBlob("key_slots", "wrapped_master_key", id: 1, wrapped)
        #expect(throws: VaultError.wrongPassphrase) { try reopen(scratch) }
    }
}

@Suite struct FormatTests {
    @Test func newerFormatVersionIsRefused() throws {
        let scratch = Scratch()
        _ = try makeVault(scratch)
        let newer = VaultFormat.version + 1
        withRawDatabase(scratch.vaultPath) { rawExec($0, "PRAGMA user_version = \(newer)") }
        let refusal = VaultError.unknownFormatVersion(found: newer, supported: VaultFormat.version)
        #expect(throws: refusal) { try reopen(scratch) }
        #expect(throws: refusal) { try Vault.checkOpenable(at: scratch.vaultPath) }
        #expect(throws: refusal) { try Vault.openLocked(at: scratch.vaultPath) }
    }

    @Test func filesThatAreNotVaultsGetClearErrors() throws {
        let scratch = Scratch()
        let dir = scratch.directory + "/a-directory"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        #expect(throws: VaultError.notAVault(path: dir, reason: "it is a directory")) { try Vault.checkOpenable(at: dir) }

        let empty = scratch.directory + "/empty"
        FileManager.default.createFile(atPath: empty, contents: Data())
        #expect(throws: VaultError.notAVault(path: empty, reason: "the file is empty")) { try Vault.checkOpenable(at: empty) }

        let text = scratch.directory + "/text"
        FileManager.default.createFile(atPath: text, contents: Data(String(repeating: "not a vault\n", count: 100).utf8))
        #expect(throws: VaultError.notAVault(path: text, reason: "not an SQLite database")) { try Vault.checkOpenable(at: text) }

        let otherDB = scratch.directory + "/other.db"
        withRawDatabase(otherDB) { rawExec($0, "CREATE TABLE t (x); INSERT INTO t VALUES (1)") }
        #expect(throws: VaultError.notAVault(path: otherDB, reason: "an SQLite database of another application")) {
            try Vault.checkOpenable(at: otherDB)
        }

        let missing = scratch.directory + "/missing.vault"
        #expect(throws: VaultError.vaultNotFound(missing)) { try Vault.open(at: missing, passphrase: secret(passphrase)) }
        #expect(!FileManager.default.fileExists(atPath: missing))
    }

    @Test func truncatedVaultIsRefusedNotMisread() throws {
        let scratch = Scratch()
        let vault = try makeVault(scratch)
        for i in 0..<200 { try vault.store(secret(String(repeating: "x", count: 500)), at: path("d/item\(i)")) }
        withRawDatabase(scratch.vaultPath) { rawExec($0, "PRAGMA wal_checkpoint(TRUNCATE)") }
        let size = try FileManager.default.attributesOfItem(atPath: scratch.vaultPath)[.size] as! Int
        #expect(truncate(scratch.vaultPath, off_t(size / 2)) == 0)
        do {
            let reopened = try reopen(scratch)
            let problems = try reopened.verify()
            Issue.record("a truncated vault opened and verified with \(problems.count) problems")
        } catch let error as VaultError {
            switch error {
            case .integrityFailure, .notAVault: break
            default: Issue.record("unexpected error for a truncated vault: \(error)")
            }
        }
    }
}

@Suite struct NameTests {
    @Test(arguments: [
        "", String(repeating: "n", count: 256), "a/b", "with\u{0}nul", ".", "..",
    ])
    func invalidNamesAreRefused(name: String) {
        #expect(throws: VaultError.self) { try ItemName(name) }
    }

    @Test func invalidUTF8IsRefusedAndLimitsHold() throws {
        #expect(throws: VaultError.self) { try ItemName(bytes: [0x66, 0xFF, 0x6F]) }
        let longest = String(repeating: "é", count: 127) + "x"  // 255 bytes
        #expect(try ItemName(longest).count == 255)
        let scratch = Scratch()
        let vault = try makeVault(scratch)
        try vault.store(secret("v"), at: VaultPath("dir/" + longest))
        try vault.store(secret("w"), at: VaultPath("dir/line\nbreak\tand\u{1}control"))
        #expect(try reopen(scratch).list(path("dir")).count == 2)
        #expect(throws: VaultError.self) { try vault.store(secret("v"), at: VaultPath("dir/" + longest + "y")) }
        #expect(try vault.list(path("dir")).count == 2)
    }
}

@Suite struct ConcurrencyTests {
    @Test func twoConnectionsWritingAtOnceLoseNothing() throws {
        let scratch = Scratch()
        _ = try makeVault(scratch)
        let a = try reopen(scratch), b = try reopen(scratch)
        let perWriter = 60
        DispatchQueue.concurrentPerform(iterations: 2) { writer in
            let vault = writer == 0 ? a : b
            for i in 0..<perWriter {
                try! vault.store(secret("w\(writer)-\(i)"), at: path("shared/dict\(i % 4)/w\(writer)-\(i)"))
                if i % 10 == 0 { try! vault.store(secret("last \(writer) \(i)"), at: path("shared/contended")) }
            }
        }
        let check = try reopen(scratch)
        for writer in 0..<2 {
            for i in 0..<perWriter {
                #expect(try check.read(path("shared/dict\(i % 4)/w\(writer)-\(i)")).testBytes == Array("w\(writer)-\(i)".utf8))
            }
        }
        #expect(try check.verify().isEmpty)
    }
}
