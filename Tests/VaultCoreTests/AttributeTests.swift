import CSQLite
import Foundation
import Testing
import VaultCore

func attributeName(_ text: String) -> AttributeName { try! AttributeName(text) }

func pair(_ name: String, _ value: String) -> Attribute { Attribute(name: attributeName(name), value: secret(value)) }

/// name=value lines of everything at `path`, for comparisons.
func attributeLines(_ vault: Vault, _ at: String) throws -> [String] {
    try vault.attributes(at: path(at)).map { $0.name.description + "=" + String(decoding: $0.value.testBytes, as: UTF8.self) }
}

/// How many attribute rows the file holds for `node` (all nodes when nil), read as an attacker would.
func rawAttributeRows(_ file: String, node: NodeID? = nil) -> Int {
    withRawDatabase(file) { db in
        rawBlobs(db, "SELECT node, tag FROM attributes" + (node.map { " WHERE node = \($0.rawValue)" } ?? "")).count
    }
}

/// Sets one column of the attribute row `rowid`.
func rawSetAttributeColumn(_ file: String, _ column: String, rowid: Int64, _ bytes: [UInt8]) {
    withRawDatabase(file) { db in
        var statement: OpaquePointer?
        precondition(sqlite3_prepare_v2(db, "UPDATE attributes SET \(column) = ? WHERE rowid = ?", -1, &statement, nil) == SQLITE_OK)
        defer { sqlite3_finalize(statement) }
        _ = bytes.withUnsafeBytes { sqlite3_bind_blob(statement, 1, $0.baseAddress, Int32($0.count), csqlite_transient()) }
        sqlite3_bind_int64(statement, 2, rowid)
        precondition(sqlite3_step(statement) == SQLITE_DONE)
    }
}

/// (rowid, column) of every attribute row of `node`.
func rawAttributeColumn(_ file: String, _ column: String, node: NodeID) -> [(Int64, [UInt8])] {
    withRawDatabase(file) { rawBlobs($0, "SELECT rowid, \(column) FROM attributes WHERE node = \(node.rawValue) ORDER BY rowid") }
}

@Suite(.tags(.slow)) struct AttributeTests {
    @Test(arguments: StorageEngine.all)
    func setGetListAndRemoveByNodeAndByPath(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let item = try vault.store(secret("v"), at: path("app/token"))
        try vault.setAttribute(attributeName("service"), to: secret("github"), of: item.id, mode: .createOrReplace)
        try vault.setAttribute(attributeName("account"), to: secret("me"), at: path("app/token"))
        try vault.setAttribute(attributeName("empty"), to: secret(""), at: path("app/token"))
        let binary: [UInt8] = [0, 0xFF, 0x0A, 0x80]
        try vault.setAttribute(attributeName("with/slash.and=equals"), to: secret(binary), of: item.id)
        #expect(try vault.attributeNames(of: item.id).map(\.description) == ["account", "empty", "service", "with/slash.and=equals"])
        #expect(try vault.attribute(attributeName("service"), of: item.id).testBytes == Array("github".utf8))
        #expect(try vault.attribute(attributeName("empty"), at: path("app/token")).count == 0)
        #expect(try vault.attribute(attributeName("with/slash.and=equals"), of: item.id).testBytes == binary)

        // Dictionaries (the root included) have attributes of their own.
        let app = try vault.node(at: path("app")).id
        try vault.setAttribute(attributeName("service"), to: secret("dictionary's"), of: app)
        try vault.setAttribute(attributeName("label"), to: secret("root"), of: .root)
        #expect(try attributeLines(vault, "app") == ["service=dictionary's"])
        #expect(try vault.attributeNames(of: .root).map(\.description) == ["label"])

        try vault.removeAttribute(attributeName("account"), of: item.id)
        try vault.removeAttribute(attributeName("empty"), at: path("app/token"))
        let reopened = try reopen(scratch)
        #expect(try reopened.attributeNames(of: item.id).map(\.description) == ["service", "with/slash.and=equals"])
        #expect(try reopened.verify().isEmpty)
    }

    @Test func createReplaceAndMissingAttributes() throws {
        let scratch = Scratch()
        let vault = try makeVault(scratch)
        let id = try vault.store(secret("v"), at: path("a")).id
        let name = attributeName("service")
        #expect(throws: VaultError.noSuchAttribute("node \(id)")) {
            try vault.setAttribute(name, to: secret("x"), of: id, mode: .replace)
        }
        #expect(try vault.attributeNames(of: id).isEmpty)
        try vault.setAttribute(name, to: secret("first"), of: id, mode: .create)
        #expect(throws: VaultError.attributeExists("node \(id)")) {
            try vault.setAttribute(name, to: secret("second"), of: id, mode: .create)
        }
        #expect(try vault.attribute(name, of: id).testBytes == Array("first".utf8))
        try vault.setAttribute(name, to: secret("third"), of: id, mode: .replace)
        try vault.setAttribute(name, to: secret("fourth"), of: id, mode: .createOrReplace)
        #expect(try vault.attribute(name, of: id).testBytes == Array("fourth".utf8))
        #expect(rawAttributeRows(scratch.vaultPath, node: id) == 1)

        // By node the messages name the node only; by path, the path and the attribute.
        #expect(throws: VaultError.noSuchAttribute("node \(id)")) { try vault.attribute(attributeName("other"), of: id) }
        #expect(throws: VaultError.noSuchAttribute("node \(id)")) { try vault.removeAttribute(attributeName("other"), of: id) }
        #expect(throws: VaultError.noSuchAttribute("a, attribute \"other\"")) { try vault.attribute(attributeName("other"), at: path("a")) }
        #expect(throws: VaultError.notFound("node #999")) { try vault.attributeNames(of: NodeID(999)) }
        #expect(throws: VaultError.notFound("b")) { try vault.attributes(at: path("b")) }
    }

    @Test(arguments: StorageEngine.all)
    func namesAreCheckedAndLimitsStoreNothing(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let id = try vault.store(secret("v"), at: path("a")).id

        #expect(Vault.maximumAttributeNameBytes == 255 && AttributeName.maximumBytes == 255)
        #expect(Vault.maximumAttributeValueBytes == 65536 && Vault.maximumAttributeBytesPerNode == 262144)
        _ = try AttributeName(String(repeating: "n", count: 255))
        #expect { try AttributeName(String(repeating: "n", count: 256)) } throws: {
            if case VaultError.attributeNameTooLong = $0 { return true } else { return false }
        }
        for bad in [[], [0x61, 0x00, 0x62], [0xC3, 0x28]] as [[UInt8]] {
            #expect { try AttributeName(bytes: bad) } throws: {
                if case VaultError.invalidName = $0 { return true } else { return false }
            }
        }

        let name = attributeName("v")
        try vault.setAttribute(name, to: secret([UInt8](repeating: 1, count: 65536)), of: id)
        #expect(throws: VaultError.attributeTooLarge(size: 65537, limit: 65536)) {
            try vault.setAttribute(name, to: secret([UInt8](repeating: 2, count: 65537)), of: id)
        }
        #expect(try vault.attribute(name, of: id).testBytes == [UInt8](repeating: 1, count: 65536))

        // Names and values count together: v, w, x of 65 536 bytes each with their one-byte
        // names leave 65 533 bytes: a fourth of a one-byte name takes a value of 65 532 at most.
        try vault.setAttribute(attributeName("w"), to: secret([UInt8](repeating: 3, count: 65536)), of: id)
        try vault.setAttribute(attributeName("x"), to: secret([UInt8](repeating: 4, count: 65536)), of: id)
        let changedBefore = try vault.node(id).attributes.changed
        #expect(throws: VaultError.attributesFull("node \(id)")) {
            try vault.setAttribute(attributeName("y"), to: secret([UInt8](repeating: 5, count: 65533)), of: id)
        }
        #expect(try vault.node(id).attributes.changed == changedBefore)
        #expect(try vault.attributeNames(of: id).map(\.description) == ["v", "w", "x"])
        try vault.setAttribute(attributeName("y"), to: secret([UInt8](repeating: 5, count: 65532)), of: id)
        // Replacing counts the new value instead of the old one.
        try vault.setAttribute(attributeName("y"), to: secret([UInt8](repeating: 6, count: 65532)), of: id)
        #expect(throws: VaultError.attributesFull("node \(id)")) {
            try vault.setAttribute(attributeName("y"), to: secret([UInt8](repeating: 6, count: 65533)), of: id)
        }
        try vault.removeAttribute(attributeName("y"), of: id)
        try vault.setAttribute(attributeName("y"), to: secret("fits again"), of: id)

        // store with attributes: one transaction, so an attribute over a limit stores no item either.
        #expect(throws: VaultError.attributeTooLarge(size: 65537, limit: 65536)) {
            try vault.store(secret("content"), at: path("new/item"),
                            attributes: [pair("ok", "fine"), Attribute(name: name, value: secret([UInt8](repeating: 0, count: 65537)))])
        }
        #expect(throws: VaultError.notFound("new")) { try vault.node(at: path("new/item")) }
        #expect(try vault.verify().isEmpty)
    }

    @Test(arguments: StorageEngine.all)
    func changingAttributesSetsTheChangeTimeOnly(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let item = try vault.store(secret("v"), at: path("a"))
        usleep(2000)
        try vault.setAttribute(attributeName("k"), to: secret("v"), of: item.id)
        let set = try vault.node(item.id).attributes
        #expect(set.changed > item.attributes.changed)
        #expect(set.modified == item.attributes.modified && set.accessed == item.attributes.accessed)
        #expect(set.contentVersion == item.attributes.contentVersion)
        usleep(2000)
        try vault.removeAttribute(attributeName("k"), of: item.id)
        #expect(try vault.node(item.id).attributes.changed > set.changed)
        let stored = try vault.store(secret("w"), at: path("a"), attributes: [pair("k", "again")])
        #expect(try vault.node(item.id).attributes == stored.attributes)
    }

    @Test(arguments: StorageEngine.all)
    func storeSetsValueAndAttributesTogetherAndKeepsOthers(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        try vault.store(secret("one"), at: path("mail/work"), attributes: [pair("service", "imap"), pair("account", "me")])
        try vault.store(secret("two"), at: path("mail/work"), attributes: [pair("account", "you"), pair("label", "Work mail")])
        #expect(try vault.read(path("mail/work")).testBytes == Array("two".utf8))
        #expect(try attributeLines(vault, "mail/work") == ["account=you", "label=Work mail", "service=imap"])
    }

    @Test func renameKeepsAttributesAndEveryDeleteRemovesThem() throws {
        let scratch = Scratch()
        let vault = try makeVault(scratch)
        let token = try vault.store(secret("t"), at: path("app/token"), attributes: [pair("service", "github")]).id
        let appID = try vault.node(at: path("app")).id
        try vault.setAttribute(attributeName("label"), to: secret("apps"), of: appID)

        // Renames and moves, by path and by node, keep them (nothing is re-encrypted).
        let sealed = rawAttributeColumn(scratch.vaultPath, "value", node: token)
        try vault.move(path("app/token"), to: path("app/renamed"))
        try vault.makeDictionary(at: path("other"), withIntermediates: false)
        try vault.move(path("app"), to: path("other"))
        let other = try vault.node(at: path("other")).id
        try vault.move(try ItemName("app"), from: other, to: try ItemName("moved"), in: .root)
        #expect(try attributeLines(vault, "moved/renamed") == ["service=github"])
        #expect(try attributeLines(vault, "moved") == ["label=apps"])
        #expect(rawAttributeColumn(scratch.vaultPath, "value", node: token).map(\.1) == sealed.map(\.1))
        #expect(try vault.find([pair("service", "github")]) == [path("moved/renamed")])

        // unlink
        let unlinked = try vault.store(secret("x"), at: path("moved/gone"), attributes: [pair("k", "v")]).id
        try vault.remove(named: try ItemName("gone"), in: appID, kind: .item)
        #expect(rawAttributeRows(scratch.vaultPath, node: unlinked) == 0)
        // rmdir
        let empty = try vault.makeDictionary(at: path("empty"), withIntermediates: false).id
        try vault.setAttribute(attributeName("k"), to: secret("v"), of: empty)
        try vault.remove(named: try ItemName("empty"), in: .root, kind: .dictionary)
        #expect(rawAttributeRows(scratch.vaultPath, node: empty) == 0)
        // a replacing rename: the replaced item's attributes go, the moved one's stay
        let replaced = try vault.store(secret("old"), at: path("target"), attributes: [pair("service", "old")]).id
        let source = try vault.store(secret("new"), at: path("source"), attributes: [pair("service", "new")]).id
        try vault.move(try ItemName("source"), from: .root, to: try ItemName("target"), in: .root)
        #expect(rawAttributeRows(scratch.vaultPath, node: replaced) == 0)
        #expect(rawAttributeRows(scratch.vaultPath, node: source) == 1)
        #expect(try attributeLines(vault, "target") == ["service=new"])
        #expect(try vault.find([pair("service", "old")]).isEmpty)
        // rm -r of a subtree, its dictionaries' attributes and their items' alike
        try vault.store(secret("deep"), at: path("moved/a/b/c"), attributes: [pair("k", "deep")])
        try vault.setAttribute(attributeName("k"), to: secret("b"), at: path("moved/a/b"))
        #expect(rawAttributeRows(scratch.vaultPath) == 5)
        try vault.remove(path("moved"), recursive: true)
        #expect(rawAttributeRows(scratch.vaultPath) == 1)  // target's
        #expect(try vault.find([pair("k", "deep")]).isEmpty)
        #expect(try vault.verify().isEmpty)
    }

    @Test(arguments: StorageEngine.all)
    func findMatchesEveryPairExactly(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        try vault.store(secret("1"), at: path("z/github"), attributes: [pair("service", "github"), pair("account", "alice")])
        try vault.store(secret("2"), at: path("a/github"), attributes: [pair("service", "github"), pair("account", "bob")])
        try vault.store(secret("3"), at: path("gitlab"), attributes: [pair("service", "gitlab"), pair("account", "alice")])
        try vault.store(secret("4"), at: path("prefix"), attributes: [pair("service", "githu")])
        try vault.makeDictionary(at: path("dict"), withIntermediates: false)
        try vault.setAttribute(attributeName("service"), to: secret("github"), at: path("dict"))

        #expect(try vault.find([pair("service", "github")]) == [path("a/github"), path("z/github")])
        #expect(try vault.find([pair("service", "github"), pair("account", "alice")]) == [path("z/github")])
        #expect(try vault.find([pair("account", "alice"), pair("service", "github")]) == [path("z/github")])
        #expect(try vault.find([pair("account", "alice")]) == [path("gitlab"), path("z/github")])
        #expect(try vault.find([pair("service", "github"), pair("account", "carol")]).isEmpty)
        #expect(try vault.find([pair("service", "GitHub")]).isEmpty)
        #expect(try vault.find([pair("service", "github "), pair("account", "alice")]).isEmpty)
        // The pair's name and value are hashed apart: ("servic", "egithub") is another pair.
        #expect(try vault.find([pair("servic", "egithub")]).isEmpty)
        #expect(throws: VaultError.self) { try vault.find([]) }
    }

    @Test(arguments: StorageEngine.all)
    func findOnTwoThousandItemsFindsEachOnce(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        for i in 0..<2000 {
            try vault.store(secret("s\(i)"), at: path("d\(i % 20)/s\(i)"),
                            attributes: [pair("service", "svc\(i % 100)"), pair("account", "user\(i % 7)")])
        }
        let found = try vault.find([pair("service", "svc42")])
        #expect(found.count == 20)
        #expect(Set(found.map(\.description)) == Set((0..<2000).filter { $0 % 100 == 42 }.map { "d\($0 % 20)/s\($0)" }))
        #expect(found == found.sorted { $0.components.lexicographicallyPrecedes($1.components) })
        let both = try vault.find([pair("service", "svc42"), pair("account", "user3")])
        #expect(Set(both.map(\.description)) == Set((0..<2000).filter { $0 % 100 == 42 && $0 % 7 == 3 }.map { "d\($0 % 20)/s\($0)" }))
        #expect(try vault.find([pair("service", "svc100")]).isEmpty)
    }

    @Test func noAttributeNameOrValueIsInTheFileInClear() throws {
        let scratch = Scratch()
        let vault = try makeVault(scratch)
        let nameCanary = "canary-attribute-name-7f3a9"
        let valueCanary = "canary-attribute-value-c41e2"
        try vault.store(secret("x"), at: path("item"), attributes: [pair(nameCanary, valueCanary)])
        try vault.makeDictionary(at: path("dict"), withIntermediates: false)
        try vault.setAttribute(attributeName(nameCanary + "-dict"), to: secret(valueCanary + "-dict"), at: path("dict"))
        try vault.setAttribute(attributeName("other"), to: secret(valueCanary + "-replaced"), at: path("item"))
        try vault.setAttribute(attributeName("other"), to: secret("new"), at: path("item"))
        let bytes = vaultFileBytes(scratch.vaultPath)
        #expect(bytes.count > 10_000)
        for canary in [nameCanary, valueCanary, valueCanary + "-replaced"] {
            #expect(!contains(bytes, Array(canary.utf8)), "\(canary) is in the vault's files")
            #expect(!contains(bytes, Array(canary.prefix(12).utf8)), "part of \(canary) is in the vault's files")
        }
        // The value's length shows only as a bucket: 1 byte and 60 bytes seal to the same size.
        try vault.setAttribute(attributeName("short"), to: secret("a"), at: path("item"))
        try vault.setAttribute(attributeName("long"), to: secret(String(repeating: "b", count: 60)), at: path("item"))
        let id = try vault.node(at: path("item")).id
        let sizes = Set(rawAttributeColumn(scratch.vaultPath, "length(value)", node: id).map { $0.1 })
        let names = Set(rawAttributeColumn(scratch.vaultPath, "length(name)", node: id).map { $0.1 })
        #expect(sizes.count == 1 && names.count == 1)
    }
}
