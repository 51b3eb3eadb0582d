import Foundation
import Testing
import TestSupport
import VaultCore

/// What a Secret Service needs of the vault: items' labels and content types kept apart from
/// their attributes, whole items stored all or nothing, searches, names made from labels, and a
/// vault opened before its passphrase is known.
@Suite struct ItemPropertyTests {
    /// The property's bytes, nil when unset.
    private func bytes(_ vault: Vault, _ property: ItemProperty, of id: NodeID) throws -> [UInt8]? {
        try vault.property(property, of: id)?.testBytes
    }

    private func names(_ vault: Vault, _ ids: [NodeID]) throws -> [String] {
        try ids.map { try vault.name(of: $0)?.description ?? "/" }
    }

    private func dictionaryID(_ vault: Vault, _ at: String) throws -> NodeID {
        try vault.node(at: path(at)).id
    }

    // MARK: properties

    @Test(arguments: StorageEngine.all)
    func propertiesAreSetReadAndRemovedApartFromAttributes(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let item = try vault.store(secret("v"), at: path("login/github"), attributes: [pair("service", "github")])
        #expect(try bytes(vault, .label, of: item.id) == nil)
        #expect(try bytes(vault, .contentType, of: item.id) == nil)

        let before = try vault.node(item.id).attributes.changed
        try vault.setProperty(.label, to: secret("GitHub (me)"), of: item.id)
        try vault.setProperty(.contentType, to: secret("text/plain"), of: item.id)
        #expect(try vault.node(item.id).attributes.changed >= before)
        #expect(try bytes(vault, .label, of: item.id) == Array("GitHub (me)".utf8))
        #expect(try bytes(vault, .contentType, of: item.id) == Array("text/plain".utf8))

        // No listing of the user's attributes shows them, and they are not search attributes.
        #expect(try vault.attributeNames(of: item.id).map(\.description) == ["service"])
        #expect(try vault.attributes(of: item.id).map(\.name.description) == ["service"])
        #expect(try attributeLines(vault, "login/github") == ["service=github"])
        #expect(try vault.find([pair("service", "github")]) == [path("login/github")])

        // An empty label is a label; nil removes it, twice without complaint.
        try vault.setProperty(.label, to: secret(""), of: item.id)
        #expect(try bytes(vault, .label, of: item.id) == [])
        try vault.setProperty(.label, to: nil, of: item.id)
        #expect(try bytes(vault, .label, of: item.id) == nil)
        try vault.setProperty(.label, to: nil, of: item.id)
        #expect(throws: VaultError.noSuchAttribute("node \(item.id)")) { try vault.removeProperty(.label, of: item.id) }
        try vault.removeProperty(.contentType, of: item.id)
        #expect(try bytes(vault, .contentType, of: item.id) == nil)

        // A value the caller keeps (not an optional) is borrowed.
        let kept = secret("kept by the caller")
        try vault.setProperty(.contentType, to: kept, of: item.id)
        #expect(try bytes(vault, .contentType, of: item.id) == kept.testBytes)
        try vault.setProperty(.contentType, to: nil, of: item.id)

        // setxattr's flags, by path too, and on dictionaries.
        try vault.setProperty(.label, to: secret("first"), of: item.id, mode: .create)
        #expect(throws: VaultError.attributeExists("node \(item.id)")) {
            try vault.setProperty(.label, to: secret("again"), of: item.id, mode: .create)
        }
        #expect(throws: VaultError.noSuchAttribute("node \(item.id)")) {
            try vault.setProperty(.contentType, to: secret("x"), of: item.id, mode: .replace)
        }
        try vault.setProperty(.label, to: secret("Login"), at: path("login"))
        #expect(try vault.property(.label, at: path("login"))?.testBytes == Array("Login".utf8))
        #expect(try vault.property(.label, at: path("login/github"))?.testBytes == Array("first".utf8))

        let reopened = try reopen(scratch)
        #expect(try bytes(reopened, .label, of: item.id) == Array("first".utf8))
        #expect(try reopened.attributeNames(of: item.id).map(\.description) == ["service"])
        #expect(try reopened.verify().isEmpty)
    }

    @Test(arguments: StorageEngine.all)
    func propertiesAreLimitedLikeAttributeValues(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let id = try vault.store(secret("v"), at: path("a")).id
        let limit = Vault.maximumAttributeValueBytes
        #expect(throws: VaultError.attributeTooLarge(size: limit + 1, limit: limit)) {
            try vault.setProperty(.label, to: secret([UInt8](repeating: 0x41, count: limit + 1)), of: id)
        }
        // Three full values and a full label fill the node: the content type no longer fits.
        for index in 0..<3 {
            try vault.setAttribute(attributeName("v\(index)"), to: secret([UInt8](repeating: 1, count: limit - 10)), of: id)
        }
        try vault.setProperty(.label, to: secret([UInt8](repeating: 0x41, count: limit - 10)), of: id)
        #expect(throws: VaultError.attributesFull("node \(id)")) {
            try vault.setProperty(.contentType, to: secret([UInt8](repeating: 0x41, count: 100)), of: id)
        }
        // And the label counts against a user attribute as much.
        try vault.removeAttribute(attributeName("v2"), of: id)
        try vault.setProperty(.contentType, to: secret([UInt8](repeating: 0x41, count: limit - 10)), of: id)
        #expect(throws: VaultError.attributesFull("node \(id)")) {
            try vault.setAttribute(attributeName("v2"), to: secret([UInt8](repeating: 1, count: 100)), of: id)
        }
        #expect(try vault.verify().isEmpty)
    }

    @Test(arguments: StorageEngine.all)
    func userAttributeNamesCannotReachAProperty(engine: StorageEngine) throws {
        // A property is stored under a name starting with NUL; no public way makes one.
        #expect(throws: VaultError.invalidName("an attribute name cannot contain a NUL byte")) {
            try AttributeName(bytes: [0] + Array("label".utf8))
        }
        #expect(throws: VaultError.invalidName("an attribute name cannot contain a NUL byte")) { try AttributeName("\u{0}label") }
        #expect(throws: VaultError.invalidName("an attribute name cannot contain a NUL byte")) {
            try ([0] + Array("label".utf8)).withUnsafeBytes { raw in _ = try AttributeName(bytes: raw) }
        }
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let id = try vault.store(secret("v"), at: path("a")).id
        try vault.setProperty(.label, to: secret("the label"), of: id)
        try vault.setAttribute(attributeName("label"), to: secret("an attribute"), of: id)
        #expect(try bytes(vault, .label, of: id) == Array("the label".utf8))
        #expect(try attributeLines(vault, "a") == ["label=an attribute"])
        try vault.removeAttribute(attributeName("label"), of: id)
        #expect(try bytes(vault, .label, of: id) == Array("the label".utf8))
    }

    // MARK: attributes at once

    @Test(arguments: StorageEngine.all)
    func attributesAreReadAndReplacedAtOnce(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let id = try vault.store(secret("v"), at: path("a"), attributes: [pair("b", "2"), pair("a", "1"), pair("gone", "x")]).id
        try vault.setProperty(.label, to: secret("kept"), of: id)
        #expect(try vault.attributes(of: id).map { $0.name.description + "=" + String(decoding: $0.value.testBytes, as: UTF8.self) }
            == ["a=1", "b=2", "gone=x"])

        let before = try vault.node(id).attributes.changed
        try vault.replaceAttributes(of: id, with: [pair("z", "26"), pair("a", "one")])
        #expect(try attributeLines(vault, "a") == ["a=one", "z=26"])
        #expect(try bytes(vault, .label, of: id) == Array("kept".utf8))
        #expect(try vault.node(id).attributes.changed >= before)
        #expect(try vault.find([pair("b", "2")]).isEmpty)
        #expect(try vault.find([pair("z", "26")]) == [path("a")])

        // All or nothing: a value over the limit, or a name given twice, leaves them as they were.
        let limit = Vault.maximumAttributeValueBytes
        #expect(throws: VaultError.attributeTooLarge(size: limit + 1, limit: limit)) {
            try vault.replaceAttributes(of: id, with: [pair("new", "n"), Attribute(name: attributeName("huge"),
                                                                                   value: secret([UInt8](repeating: 1, count: limit + 1)))])
        }
        #expect(throws: VaultError.invalidArgument("the same attribute name is given twice")) {
            try vault.replaceAttributes(of: id, with: [pair("new", "n"), pair("new", "m")])
        }
        #expect(try attributeLines(vault, "a") == ["a=one", "z=26"])

        try vault.replaceAttributes(of: id, with: [])
        #expect(try vault.attributes(of: id).isEmpty)
        #expect(try bytes(vault, .label, of: id) == Array("kept".utf8))
        #expect(try vault.verify().isEmpty)
    }

    // MARK: whole items

    @Test(arguments: StorageEngine.all)
    func createItemStoresEverythingWithTheDictionarysClass(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        _ = try vault.makeDictionary(named: ItemName("login"), in: .root)
        try vault.setClass(.afterFirstUnlock, at: path("login"))
        let login = try dictionaryID(vault, "login")
        let node = try vault.createItem(named: ItemName("GitHub"), in: login, content: secret("hunter2"),
                                        attributes: [pair("service", "github"), pair("user", "me")],
                                        label: secret("GitHub (me)"), contentType: secret("text/plain"))
        #expect(node.parent == login)
        #expect(node.kind == .item)
        #expect(node.attributes.mode == 0o600)
        #expect(node.attributes.accessibility == .afterFirstUnlock)
        #expect(try vault.read(path("login/GitHub")).testBytes == Array("hunter2".utf8))
        #expect(try attributeLines(vault, "login/GitHub") == ["service=github", "user=me"])
        #expect(try bytes(vault, .label, of: node.id) == Array("GitHub (me)".utf8))
        #expect(try bytes(vault, .contentType, of: node.id) == Array("text/plain".utf8))

        // Without a label or content type, neither is set; the root's default class applies.
        let plain = try vault.createItem(named: ItemName("plain"), in: .root, content: secret(""), attributes: [],
                                         label: nil, contentType: nil)
        #expect(plain.attributes.accessibility == .whenUnlocked)
        #expect(try bytes(vault, .label, of: plain.id) == nil)
        #expect(try bytes(vault, .contentType, of: plain.id) == nil)

        #expect(throws: VaultError.alreadyExists("an entry of node \(login)")) {
            _ = try vault.createItem(named: ItemName("GitHub"), in: login, content: secret("x"), attributes: [],
                                     label: nil, contentType: nil)
        }
        #expect(try vault.read(path("login/GitHub")).testBytes == Array("hunter2".utf8))
        #expect(try reopen(scratch).verify().isEmpty)
    }

    @Test func createItemStoresNothingWhenAnyPartFails() throws {
        let scratch = Scratch()
        let vault = try makeVault(scratch)
        let limit = Vault.maximumAttributeValueBytes
        let huge = [UInt8](repeating: 0x41, count: limit + 1)
        let full = [UInt8](repeating: 0x41, count: limit)
        let attempts: [(String, () throws -> Void)] = [
            ("an attribute over the value limit", {
                _ = try vault.createItem(named: ItemName("x"), in: .root, content: secret("c"),
                                         attributes: [pair("ok", "1"), Attribute(name: attributeName("big"), value: secret(huge))],
                                         label: secret("label"), contentType: nil)
            }),
            ("a label over the value limit", {
                _ = try vault.createItem(named: ItemName("x"), in: .root, content: secret("c"), attributes: [pair("ok", "1")],
                                         label: secret(huge), contentType: nil)
            }),
            ("attributes and properties over the node's limit", {
                _ = try vault.createItem(named: ItemName("x"), in: .root, content: secret("c"),
                                         attributes: [Attribute(name: attributeName("a"), value: secret(full)),
                                                      Attribute(name: attributeName("b"), value: secret(full)),
                                                      Attribute(name: attributeName("c"), value: secret(full))],
                                         label: secret(full), contentType: nil)
            }),
            ("a name given twice", {
                _ = try vault.createItem(named: ItemName("x"), in: .root, content: secret("c"),
                                         attributes: [pair("same", "1"), pair("same", "2")], label: nil, contentType: nil)
            }),
            ("content over the item size limit", {
                _ = try vault.createItem(named: ItemName("x"), in: .root,
                                         content: secret([UInt8](repeating: 0, count: vault.itemSizeLimit + 1)),
                                         attributes: [pair("ok", "1")], label: secret("label"), contentType: nil)
            }),
        ]
        for (what, attempt) in attempts {
            #expect(throws: VaultError.self, "\(what)") { try attempt() }
            #expect(try vault.itemCount() == 0, "\(what)")
            #expect(try vault.list(.root).isEmpty, "\(what)")
            #expect(rawAttributeRows(scratch.vaultPath) == 0, "\(what)")
        }
        #expect(try vault.verify().isEmpty)
    }

    @Test(arguments: StorageEngine.all)
    func replaceItemReplacesEverythingOrNothing(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        try vault.setClass(.afterFirstUnlock, at: .root)
        let created = try vault.createItem(named: ItemName("token"), in: .root, content: secret("old secret"),
                                           attributes: [pair("service", "old"), pair("stale", "1")],
                                           label: secret("Old label"), contentType: secret("text/plain"))
        let limit = Vault.maximumAttributeValueBytes

        // A part that fails leaves the old item whole.
        #expect(throws: VaultError.attributeTooLarge(size: limit + 1, limit: limit)) {
            _ = try vault.replaceItem(created.id, content: secret("new secret"),
                                      attributes: [pair("service", "new"),
                                                   Attribute(name: attributeName("big"), value: secret([UInt8](repeating: 1, count: limit + 1)))],
                                      label: secret("New label"), contentType: nil)
        }
        #expect(throws: VaultError.attributeTooLarge(size: limit + 1, limit: limit)) {
            _ = try vault.replaceItem(created.id, content: secret("new secret"), attributes: [pair("service", "new")],
                                      label: secret("New label"), contentType: secret([UInt8](repeating: 1, count: limit + 1)))
        }
        #expect(try vault.read(path("token")).testBytes == Array("old secret".utf8))
        #expect(try attributeLines(vault, "token") == ["service=old", "stale=1"])
        #expect(try bytes(vault, .label, of: created.id) == Array("Old label".utf8))
        #expect(try bytes(vault, .contentType, of: created.id) == Array("text/plain".utf8))

        let replaced = try vault.replaceItem(created.id, content: secret("new secret"), attributes: [pair("service", "new")],
                                             label: secret("New label"), contentType: nil)
        #expect(replaced.id == created.id)
        #expect(replaced.attributes.size == "new secret".utf8.count)
        #expect(replaced.attributes.accessibility == .afterFirstUnlock)
        #expect(replaced.attributes.changed >= created.attributes.changed)
        #expect(try vault.read(path("token")).testBytes == Array("new secret".utf8))
        #expect(try attributeLines(vault, "token") == ["service=new"])
        #expect(try bytes(vault, .label, of: created.id) == Array("New label".utf8))
        #expect(try bytes(vault, .contentType, of: created.id) == nil)
        #expect(try vault.find([pair("service", "old")]).isEmpty)

        let dictionary = try vault.makeDictionary(named: ItemName("d"), in: .root)
        #expect(throws: VaultError.isADictionary("node \(dictionary.id)")) {
            _ = try vault.replaceItem(dictionary.id, content: secret("x"), attributes: [], label: nil, contentType: nil)
        }
        #expect(try reopen(scratch).verify().isEmpty)
    }

    // MARK: search

    @Test(arguments: StorageEngine.all)
    func findItemsWithAndWithoutAParent(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let one = try vault.store(secret("1"), at: path("login/one"), attributes: [pair("service", "github"), pair("user", "me")])
        let two = try vault.store(secret("2"), at: path("login/two"), attributes: [pair("service", "github"), pair("user", "you")])
        let three = try vault.store(secret("3"), at: path("work/three"), attributes: [pair("service", "github"), pair("user", "me")])
        let loose = try vault.store(secret("4"), at: path("loose"))
        // A dictionary with the same attributes is never an item found.
        try vault.setAttribute(attributeName("service"), to: secret("github"), at: path("work"))
        try vault.setProperty(.label, to: secret("github"), of: loose.id)
        let login = try dictionaryID(vault, "login")
        let work = try dictionaryID(vault, "work")

        #expect(try vault.findItems([pair("service", "github")], in: nil) == [one.id, two.id, three.id])
        #expect(try vault.findItems([pair("service", "github"), pair("user", "me")], in: nil) == [one.id, three.id])
        #expect(try vault.findItems([pair("service", "github"), pair("user", "me")], in: login) == [one.id])
        #expect(try vault.findItems([pair("user", "you")], in: work).isEmpty)
        #expect(try vault.findItems([pair("service", "gitlab")], in: nil).isEmpty)
        #expect(try vault.findItems([], in: login) == [one.id, two.id])
        #expect(try vault.findItems([], in: .root) == [loose.id])
        #expect(try vault.findItems([], in: nil) == [one.id, two.id, three.id, loose.id])
        #expect(try names(vault, try vault.findItems([], in: work)) == ["three"])

        #expect(throws: VaultError.notADictionary("node \(loose.id)")) { try vault.findItems([], in: loose.id) }
        #expect(throws: VaultError.notADictionary("node \(loose.id)")) { try vault.findItems([pair("user", "me")], in: loose.id) }
        #expect(throws: VaultError.notFound("node \(NodeID(999))")) { try vault.findItems([], in: NodeID(999)) }
    }

    // MARK: names from labels

    private func name(_ vault: Vault, _ label: [UInt8], in parent: NodeID = .root) throws -> [UInt8] {
        try vault.availableItemName(fromLabel: secret(label), in: parent).withUnsafeBytes { Array($0) }
    }

    private func name(_ vault: Vault, _ label: String, in parent: NodeID = .root) throws -> String {
        String(decoding: try name(vault, Array(label.utf8), in: parent), as: UTF8.self)
    }

    @Test(arguments: StorageEngine.all)
    func itemNamesFromLabels(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        #expect(try name(vault, "GitHub (me)") == "GitHub (me)")
        #expect(try name(vault, "Zoë’s Wi‑Fi ✓") == "Zoë’s Wi‑Fi ✓")
        #expect(try name(vault, "https://example.org/login") == "https:__example.org_login")
        #expect(try name(vault, "  padded  ") == "padded")
        #expect(try name(vault, ".hidden") == "_hidden")
        #expect(try name(vault, "  .config") == "_config")
        #expect(try name(vault, ".") == "_")
        #expect(try name(vault, "..") == "_.")
        #expect(try name(vault, "") == "item")
        #expect(try name(vault, "   ") == "item")
        #expect(try name(vault, "a\tb\nc\u{7F}d\u{85}e") == "a_b_c_d_e")
        #expect(try name(vault, "\u{0}") == "_")
        // Bad UTF-8: each bad sequence one '_', the rest kept.
        #expect(try name(vault, [0x61, 0xFF, 0x62, 0xC3, 0x63, 0xE2, 0x82]) == Array("a_b_c_".utf8))
    }

    @Test(arguments: StorageEngine.all)
    func longLabelsAreCutOnACharacterBoundary(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        // 2-byte characters: 255 bytes would end inside one.
        let made = try name(vault, Array(String(repeating: "é", count: 200).utf8))
        #expect(made.count == 254)
        #expect(String(validating: made, as: UTF8.self) == String(repeating: "é", count: 127))
        // 4-byte characters: cut to 252 bytes, then " 2" fits beside 252 bytes too.
        let emoji = String(repeating: "🔑", count: 100)
        let cut = try name(vault, emoji)
        #expect(cut == String(repeating: "🔑", count: 63))
        _ = try vault.createItem(named: ItemName(cut), in: .root, content: secret("x"), attributes: [], label: nil, contentType: nil)
        #expect(try name(vault, emoji) == String(repeating: "🔑", count: 63) + " 2")
        // A space left at a cut is trimmed, before a number too.
        #expect(try name(vault, String(repeating: "a", count: 254) + " bcd") == String(repeating: "a", count: 254))
        let spaced = String(repeating: "a", count: 252) + " b"
        #expect(try name(vault, spaced) == spaced)
        _ = try vault.createItem(named: ItemName(spaced), in: .root, content: secret("x"), attributes: [], label: nil, contentType: nil)
        #expect(try name(vault, spaced) == String(repeating: "a", count: 252) + " 2")
    }

    @Test(arguments: StorageEngine.all)
    func takenNamesGetANumber(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let login = try vault.makeDictionary(named: ItemName("login"), in: .root).id
        for expected in ["Login", "Login 2", "Login 3"] {
            let made = try vault.availableItemName(fromLabel: secret("Login"), in: login)
            #expect(made.description == expected)
            _ = try vault.createItem(named: made, in: login, content: secret("x"), attributes: [], label: secret("Login"),
                                     contentType: nil)
        }
        // Each dictionary has names of its own; a dictionary's name is taken as much.
        #expect(try name(vault, "Login") == "Login")
        _ = try vault.makeDictionary(named: ItemName("item"), in: .root)
        #expect(try name(vault, "") == "item 2")
        #expect(throws: VaultError.notADictionary("node \(try vault.node(at: path("login/Login")).id)")) {
            _ = try vault.availableItemName(fromLabel: secret("x"), in: try vault.node(at: path("login/Login")).id)
        }
    }

    // MARK: opened without the passphrase

    @Test(arguments: StorageEngine.all)
    func openLockedThenUnlock(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let item: NodeID
        do {
            let vault = try makeVault(scratch)
            item = try vault.createItem(named: ItemName("token"), in: .root, content: secret("secret"),
                                        attributes: [pair("service", "github")], label: secret("Token"), contentType: nil).id
        }
        let vault = try Vault.openLocked(at: scratch.vaultPath)
        #expect(vault.isLocked)
        #expect(!vault.keepsAfterFirstUnlockKeys)
        #expect(try vault.itemCount() == 1)
        let stamp = try vault.changeStamp()
        #expect(throws: VaultError.locked) { _ = try vault.property(.label, of: item) }
        #expect(throws: VaultError.locked) { _ = try vault.findItems([], in: nil) }
        #expect(throws: VaultError.locked) { _ = try vault.item(item) }
        #expect(throws: VaultError.locked) { _ = try vault.node(item) }
        #expect(throws: VaultError.locked) { _ = try vault.availableItemName(fromLabel: secret("x"), in: .root) }

        // Another process's change shows in the stamp while locked (from PostgreSQL, once its
        // notification reaches this connection: it comes after the commit, not with it).
        let other = try reopen(scratch)
        try other.setProperty(.contentType, to: secret("text/plain"), of: item)
        #expect(eventually(within: 5) { (try? vault.changeStamp()) != stamp })

        #expect(throws: VaultError.wrongPassphrase) { try vault.unlock(passphrase: secret("wrong")) }
        #expect(vault.isLocked)
        try vault.unlock(passphrase: secret(passphrase))
        #expect(!vault.isLocked)
        #expect(try bytes(vault, .label, of: item) == Array("Token".utf8))
        #expect(try bytes(vault, .contentType, of: item) == Array("text/plain".utf8))
        #expect(try vault.findItems([pair("service", "github")], in: nil) == [item])
        vault.lock()
        #expect(throws: VaultError.locked) { _ = try vault.property(.label, of: item) }
    }

    @Test func openLockedRefusesWhatIsNoVault() throws {
        let scratch = Scratch()
        #expect(throws: VaultError.self) { _ = try Vault.openLocked(at: scratch.directory + "/missing.vault") }
        _ = FileManager.default.createFile(atPath: scratch.vaultPath, contents: Data("not a vault".utf8))
        #expect(throws: VaultError.self) { _ = try Vault.openLocked(at: scratch.vaultPath) }
    }
}
