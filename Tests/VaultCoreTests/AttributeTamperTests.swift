import CSQLite
import Foundation
import Testing
import VaultCore

/// Attribute rows edited in the file as someone holding it would: every read fails with an
/// integrity failure (never another node's or another name's value) and verify reports it.
@Suite(.tags(.slow)) struct AttributeTamperTests {
    /// Two items with the same two attribute names, and their ids.
    private func makeTwoItems(_ scratch: Scratch) throws -> (Vault, NodeID, NodeID) {
        let vault = try makeVault(scratch)
        let a = try vault.store(secret("a"), at: path("app/a"), attributes: [pair("service", "alpha"), pair("account", "alice")]).id
        let b = try vault.store(secret("b"), at: path("db/b"), attributes: [pair("service", "beta"), pair("account", "bob")]).id
        return (vault, a, b)
    }

    private func expectIntegrityFailure(_ body: () throws(VaultError) -> Void, _ comment: Comment) {
        do throws(VaultError) {
            try body()
            Issue.record("no integrity failure: \(comment)")
        } catch .integrityFailure {
        } catch {
            Issue.record("\(error), not an integrity failure: \(comment)")
        }
    }

    /// Each way of reading node `id`'s attributes fails, and verify names the node's path.
    private func expectTampered(_ scratch: Scratch, _ id: NodeID, path itemPath: String, _ comment: Comment) throws {
        let vault = try reopen(scratch)
        expectIntegrityFailure({ () throws(VaultError) in _ = try vault.attribute(attributeName("service"), of: id) }, comment)
        expectIntegrityFailure({ () throws(VaultError) in _ = try vault.attributes(at: path(itemPath)) }, comment)
        let problems = try vault.verify()
        #expect(problems.contains { $0.path == itemPath }, "\(comment): \(problems)")
    }

    @Test(arguments: ["name", "value"])
    func swappedBetweenNodesIsAnIntegrityFailure(column: String) throws {
        let scratch = Scratch()
        let (_, a, b) = try makeTwoItems(scratch)
        // The service rows of a and b (the first each got).
        let rowA = rawAttributeColumn(scratch.vaultPath, column, node: a)[0]
        let rowB = rawAttributeColumn(scratch.vaultPath, column, node: b)[0]
        rawSetAttributeColumn(scratch.vaultPath, column, rowid: rowA.0, rowB.1)
        rawSetAttributeColumn(scratch.vaultPath, column, rowid: rowB.0, rowA.1)
        try expectTampered(scratch, a, path: "app/a", "\(column) swapped between nodes")
        try expectTampered(scratch, b, path: "db/b", "\(column) swapped between nodes")
    }

    @Test(arguments: ["name", "value"])
    func swappedBetweenNamesOfOneNodeIsAnIntegrityFailure(column: String) throws {
        let scratch = Scratch()
        let (_, a, _) = try makeTwoItems(scratch)
        let rows = rawAttributeColumn(scratch.vaultPath, column, node: a)
        #expect(rows.count == 2)
        rawSetAttributeColumn(scratch.vaultPath, column, rowid: rows[0].0, rows[1].1)
        rawSetAttributeColumn(scratch.vaultPath, column, rowid: rows[1].0, rows[0].1)
        try expectTampered(scratch, a, path: "app/a", "\(column) swapped between names")
    }

    @Test func aRowMovedToAnotherNodeIsAnIntegrityFailure() throws {
        let scratch = Scratch()
        let (_, a, b) = try makeTwoItems(scratch)
        // Node b loses its own service row and gets a's, tag and all.
        withRawDatabase(scratch.vaultPath) { db in
            rawExec(db, "DELETE FROM attributes WHERE node = \(b.rawValue) AND rowid = (SELECT min(rowid) FROM attributes WHERE node = \(b.rawValue))")
            rawExec(db, "INSERT INTO attributes (node, tag, search_tag, name, value) SELECT \(b.rawValue), tag, search_tag, name, value FROM attributes WHERE rowid = (SELECT min(rowid) FROM attributes WHERE node = \(a.rawValue))")
        }
        let vault = try reopen(scratch)
        // b's tag for "service" differs from a's, so by name b simply has no service...
        #expect(throws: VaultError.noSuchAttribute("node \(b)")) { try vault.attribute(attributeName("service"), of: b) }
        // ...and the moved row, found by listing or by search, fails to open for b.
        expectIntegrityFailure({ () throws(VaultError) in _ = try vault.attributes(at: path("db/b")) }, "listing")
        expectIntegrityFailure({ () throws(VaultError) in _ = try vault.attributeNames(of: b) }, "names")
        expectIntegrityFailure({ () throws(VaultError) in _ = try vault.find([pair("service", "alpha")]) }, "find")
        #expect(try vault.verify().contains { $0.path == "db/b" && $0.reason == "an attribute's name failed authentication" })
        #expect(try vault.attribute(attributeName("service"), of: a).testBytes == Array("alpha".utf8))
    }

    @Test func aRowWhoseTagIsMovedToItsNodesOtherNameIsAnIntegrityFailure() throws {
        let scratch = Scratch()
        let (_, a, _) = try makeTwoItems(scratch)
        // The account row takes the service row's tag: asked for service, a finds the account row.
        let tags = rawAttributeColumn(scratch.vaultPath, "tag", node: a)
        withRawDatabase(scratch.vaultPath) { rawExec($0, "DELETE FROM attributes WHERE rowid = \(tags[0].0)") }
        rawSetAttributeColumn(scratch.vaultPath, "tag", rowid: tags[1].0, tags[0].1)
        try expectTampered(scratch, a, path: "app/a", "tag moved to another name")
    }

    @Test(arguments: ["name", "value"])
    func aFlippedBitIsAnIntegrityFailure(column: String) throws {
        let scratch = Scratch()
        let (_, a, _) = try makeTwoItems(scratch)
        let (rowid, original) = rawAttributeColumn(scratch.vaultPath, column, node: a)[0]
        for offset in [0, 24, original.count / 2, original.count - 1] {
            var damaged = original
            damaged[offset] ^= 0x04
            rawSetAttributeColumn(scratch.vaultPath, column, rowid: rowid, damaged)
            try expectTampered(scratch, a, path: "app/a", "\(column) flipped at \(offset)")
        }
        rawSetAttributeColumn(scratch.vaultPath, column, rowid: rowid, original)
        #expect(try reopen(scratch).verify().isEmpty)
    }

    @Test func recordsOfADeletedNodeCannotPassForANewOne() throws {
        let scratch = Scratch()
        let (vault, a, _) = try makeTwoItems(scratch)
        let saved = rawAttributeColumn(scratch.vaultPath, "tag, search_tag, name, value", node: a)
        let rows = withRawDatabase(scratch.vaultPath) { db in
            (rawBlobs(db, "SELECT rowid, tag FROM attributes WHERE node = \(a.rawValue) ORDER BY rowid"),
             rawBlobs(db, "SELECT rowid, search_tag FROM attributes WHERE node = \(a.rawValue) ORDER BY rowid"),
             rawBlobs(db, "SELECT rowid, name FROM attributes WHERE node = \(a.rawValue) ORDER BY rowid"),
             rawBlobs(db, "SELECT rowid, value FROM attributes WHERE node = \(a.rawValue) ORDER BY rowid"))
        }
        #expect(saved.count == 2)
        try vault.remove(path("app/a"), recursive: false)
        #expect(rawAttributeRows(scratch.vaultPath, node: a) == 0)
        // Rewind the counter so a new item gets a's id, then put a's rows back for it.
        withRawDatabase(scratch.vaultPath) { rawExec($0, "UPDATE vault SET next_node_id = \(a.rawValue)") }
        let reborn = try reopen(scratch).store(secret("new"), at: path("app/new")).id
        #expect(reborn == a)
        withRawDatabase(scratch.vaultPath) { db in
            for i in 0..<2 {
                var statement: OpaquePointer?
                precondition(sqlite3_prepare_v2(db, "INSERT INTO attributes (node, tag, search_tag, name, value) VALUES (?, ?, ?, ?, ?)", -1, &statement, nil) == SQLITE_OK)
                sqlite3_bind_int64(statement, 1, a.rawValue)
                for (column, blob) in [rows.0[i].1, rows.1[i].1, rows.2[i].1, rows.3[i].1].enumerated() {
                    _ = blob.withUnsafeBytes { sqlite3_bind_blob(statement, Int32(column + 2), $0.baseAddress, Int32($0.count), csqlite_transient()) }
                }
                precondition(sqlite3_step(statement) == SQLITE_DONE)
                sqlite3_finalize(statement)
            }
        }
        try expectTampered(scratch, a, path: "app/new", "an old incarnation's rows")
    }

    @Test func verifyReportsOrphansAndWrongSearchTags() throws {
        let scratch = Scratch()
        let (vault, a, b) = try makeTwoItems(scratch)
        let (rowid, searchTag) = rawAttributeColumn(scratch.vaultPath, "search_tag", node: b)[0]
        // A search tag pointing elsewhere: find must not be fooled into a false match...
        let alphaTag = rawAttributeColumn(scratch.vaultPath, "search_tag", node: a)[0].1
        rawSetAttributeColumn(scratch.vaultPath, "search_tag", rowid: rowid, alphaTag)
        #expect(try reopen(scratch).find([pair("service", "alpha")]) == [path("app/a")])
        // ...and verify says so.
        #expect(try reopen(scratch).verify().contains { $0.path == "db/b" && $0.reason.contains("search tag does not match") })
        rawSetAttributeColumn(scratch.vaultPath, "search_tag", rowid: rowid, searchTag)
        #expect(try reopen(scratch).verify().isEmpty)

        // Rows of a node deleted behind the vault's back.
        withRawDatabase(scratch.vaultPath) { rawExec($0, "UPDATE attributes SET node = 4242 WHERE node = \(a.rawValue)") }
        let problems = try reopen(scratch).verify()
        #expect(problems.filter { $0.path == "<record 4242>" && $0.reason == "an attribute of a node that does not exist" }.count == 2)
        #expect(try vault.find([pair("service", "alpha")]).isEmpty)
    }
}
