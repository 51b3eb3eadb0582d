import Testing
import VaultCore

@Suite struct RoundTripTests {
    @Test(arguments: StorageEngine.all)
    func allByteValuesRoundTrip(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let bytes = (0...255).map { UInt8($0) } + (0...255).reversed().map { UInt8($0) }
        try vault.store(secret(bytes), at: path("bin/all-bytes"))
        #expect(try reopen(scratch).read(path("bin/all-bytes")).testBytes == bytes)
    }

    @Test(arguments: StorageEngine.all)
    func emptyItemRoundTrips(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        try vault.store(secret([]), at: path("empty"))
        let read = try reopen(scratch).read(path("empty"))
        #expect(read.count == 0)
        #expect(try vault.node(at: path("empty")).attributes.size == 0)
    }

    @Test(arguments: StorageEngine.all, [1, 63, 64, 65, 127, 128, 4095, 4096])
    func sizesAroundPaddingBucketsRoundTrip(engine: StorageEngine, size: Int) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        try vault.store(secret(bytes), at: path("sized"))
        #expect(try reopen(scratch).read(path("sized")).testBytes == bytes)
    }

    @Test(arguments: StorageEngine.all)
    func itemExactlyAtTheLimitIsStoredAndOneMoreByteIsRefused(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)  // default limit: 1 MiB
        let limit = vault.itemSizeLimit
        #expect(limit == 1 << 20)
        let full = (0..<limit).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try vault.store(secret(full), at: path("big/at-limit"))
        #expect(try reopen(scratch).read(path("big/at-limit")).testBytes == full)

        #expect(throws: VaultError.itemTooLarge(size: limit + 1, limit: limit)) {
            try vault.store(secret(full + [1]), at: path("big/over-limit"))
        }
        #expect(throws: VaultError.notFound("big/over-limit")) { try vault.read(path("big/over-limit")) }
        // Over the limit onto an existing item: the old content stays.
        #expect(throws: VaultError.itemTooLarge(size: limit + 1, limit: limit)) {
            try vault.store(secret(full + [1]), at: path("big/at-limit"))
        }
        #expect(try vault.read(path("big/at-limit")).testBytes == full)
    }

    @Test(arguments: StorageEngine.all)
    func perVaultLimitIsStoredAndEnforcedAfterReopening(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        _ = try makeVault(scratch, itemSizeLimit: 100)
        let vault = try reopen(scratch)
        #expect(vault.itemSizeLimit == 100)
        try vault.store(secret([UInt8](repeating: 9, count: 100)), at: path("ok"))
        #expect(throws: VaultError.itemTooLarge(size: 101, limit: 100)) {
            try vault.store(secret([UInt8](repeating: 9, count: 101)), at: path("too-big"))
        }
    }

    @Test(arguments: StorageEngine.all)
    func replacingKeepsOneNodeAndNewContent(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let first = try vault.store(secret("one"), at: path("app/pw"))
        let second = try vault.store(secret("two, longer than one"), at: path("app/pw"))
        #expect(first.id == second.id)
        #expect(try vault.read(path("app/pw")).testBytes == Array("two, longer than one".utf8))
        #expect(try vault.list(path("app")).map(\.name.description) == ["pw"])
    }

    @Test(arguments: StorageEngine.all)
    func dictionariesNestAndList(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        try vault.store(secret("x"), at: path("a/b/c/d/item"))
        try vault.makeDictionary(at: path("a/empty"), withIntermediates: false)
        let entries = try vault.list(path("a"))
        #expect(entries.map(\.name.description) == ["b", "empty"])
        #expect(entries.allSatisfy { $0.node.kind == .dictionary })
        #expect(try vault.node(at: path("a/b/c/d/item")).attributes.mode == 0o600)
        #expect(try vault.node(at: path("a/b")).attributes.mode == 0o700)
        #expect(throws: VaultError.alreadyExists("a/empty")) {
            try vault.makeDictionary(at: path("a/empty"), withIntermediates: false)
        }
        #expect(throws: VaultError.notADictionary("a/b/c/d/item")) { try vault.list(path("a/b/c/d/item")) }
        #expect(throws: VaultError.notADictionary("a/b/c/d/item")) { try vault.store(secret("y"), at: path("a/b/c/d/item/x")) }
        #expect(throws: VaultError.isADictionary("a/b")) { try vault.read(path("a/b")) }
    }

    @Test(arguments: StorageEngine.all)
    func removeItemsAndDictionaries(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        try vault.store(secret("x"), at: path("d/one"))
        try vault.store(secret("y"), at: path("d/sub/two"))
        #expect(throws: VaultError.notEmpty("d")) { try vault.remove(path("d"), recursive: false) }
        try vault.remove(path("d/one"), recursive: false)
        #expect(throws: VaultError.notFound("d/one")) { try vault.read(path("d/one")) }
        try vault.remove(path("d"), recursive: true)
        #expect(throws: VaultError.notFound("d")) { try vault.list(path("d")) }
        #expect(try vault.list(.root).isEmpty)
        #expect(try vault.verify().isEmpty)
    }

    @Test(arguments: StorageEngine.all)
    func moveRenamesAndMovesWithoutLosingContent(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        try vault.store(secret("token"), at: path("app/token"))
        try vault.store(secret("deep"), at: path("app/sub/deep"))
        try vault.makeDictionary(at: path("archive"), withIntermediates: false)
        try vault.move(path("app"), to: path("archive"))  // into an existing dictionary
        #expect(try vault.read(path("archive/app/token")).testBytes == Array("token".utf8))
        try vault.move(path("archive/app/token"), to: path("archive/app/renamed"))
        #expect(try vault.read(path("archive/app/renamed")).testBytes == Array("token".utf8))
        #expect(throws: VaultError.invalidMove("cannot move archive into itself")) {
            try vault.move(path("archive"), to: path("archive/app/sub/inside"))
        }
        try vault.store(secret("other"), at: path("other"))
        try vault.move(path("other"), to: path("archive/app/renamed"))  // replaces an item
        #expect(try vault.read(path("archive/app/renamed")).testBytes == Array("other".utf8))
        #expect(try reopen(scratch).read(path("archive/app/sub/deep")).testBytes == Array("deep".utf8))
        #expect(try vault.verify().isEmpty)
    }

    @Test(arguments: StorageEngine.all)
    func nodeOperationsReplaceAndRefuseLikeRename(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let dir = try vault.makeDictionary(named: ItemName("dir"), in: .root)
        let full = try vault.makeDictionary(named: ItemName("full"), in: .root)
        _ = try vault.createItem(named: ItemName("x"), in: full.id, content: secret("x"))
        _ = try vault.createItem(named: ItemName("a"), in: .root, content: secret("a"))
        _ = try vault.createItem(named: ItemName("b"), in: .root, content: secret("b"))
        // The by-node API (the daemon's) names no entry in its errors: names stay in wiped memory.
        let entry = "an entry of the root dictionary"
        #expect(throws: VaultError.alreadyExists(entry)) {
            try vault.move(ItemName("a"), from: .root, to: ItemName("b"), in: .root, replacing: false)
        }
        #expect(throws: VaultError.isADictionary(entry)) {
            try vault.move(ItemName("a"), from: .root, to: ItemName("dir"), in: .root)
        }
        #expect(throws: VaultError.notEmpty(entry)) {
            try vault.move(ItemName("dir"), from: .root, to: ItemName("full"), in: .root)
        }
        try vault.move(ItemName("a"), from: .root, to: ItemName("b"), in: .root)
        #expect(try vault.read(path("b")).testBytes == Array("a".utf8))
        #expect(throws: VaultError.notFound(entry)) { try vault.lookup(ItemName("a"), in: .root) }
        #expect(throws: VaultError.alreadyExists(entry)) {
            try vault.createItem(named: ItemName("b"), in: .root, content: secret("again"))
        }
        #expect(throws: VaultError.isADictionary(entry)) { try vault.remove(named: ItemName("dir"), in: .root, kind: .item) }
        #expect(throws: VaultError.notADictionary(entry)) { try vault.remove(named: ItemName("b"), in: .root, kind: .dictionary) }
        try vault.remove(named: ItemName("dir"), in: .root, kind: .dictionary)
        #expect(throws: VaultError.notFound("node \(dir.id)")) { try vault.node(dir.id) }
    }

    @Test(arguments: StorageEngine.all)
    func attributesAreStoredAndShown(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let item = try vault.store(secret("x"), at: path("item"))
        let when = Timestamp(seconds: 1_000_000_000, nanoseconds: 123_456_789)
        _ = try vault.setAttributes(of: item.id, mode: 0o640, modified: when)
        let reread = try reopen(scratch).node(at: path("item"))
        #expect(reread.attributes.mode == 0o640)
        #expect(reread.attributes.modified == when)
        #expect(reread.attributes.size == 1)
    }
}
