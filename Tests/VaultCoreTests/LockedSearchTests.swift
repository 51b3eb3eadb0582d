import Testing
import VaultCore

/// `findLockedItems`: what a Secret Service client's first search finds while the vault is
/// locked (only the search tags' key outlives a lock), and that it finds nothing once an
/// unmount's lock wiped that key too.
@Suite struct LockedSearchTests {
    /// One vault, unlocked, with items that each match the search (service=github, user=me)
    /// in a different way.
    private struct Fixture {
        let scratch: Scratch
        let vault: Vault
        let login: NodeID, sub: NodeID
        let one: NodeID, two: NodeID, three: NodeID, four: NodeID, swapped: NodeID, loose: NodeID

        init(_ engine: StorageEngine, accessibility: AccessibilityClass? = nil) throws {
            scratch = try Scratch(engine)
            vault = try makeVault(scratch)
            let both = { [pair("service", "github"), pair("user", "me")] }
            one = try vault.store(secret("1"), at: path("login/one"), attributes: both(), accessibility: accessibility).id
            // Matches only the first pair.
            two = try vault.store(secret("2"), at: path("login/two"), attributes: [pair("service", "github"), pair("user", "you")]).id
            three = try vault.store(secret("3"), at: path("work/three"), attributes: both()).id
            // In a sub-dictionary of login: not directly in it.
            four = try vault.store(secret("4"), at: path("login/sub/four"), attributes: both()).id
            // The same names and values, each with the other's value.
            swapped = try vault.store(secret("5"), at: path("login/swapped"),
                                      attributes: [pair("service", "me"), pair("user", "github")]).id
            loose = try vault.store(secret("6"), at: path("loose"), attributes: [pair("user", "me")]).id
            // A dictionary holding both pairs is never an item found.
            try vault.setAttribute(attributeName("service"), to: secret("github"), at: path("work"))
            try vault.setAttribute(attributeName("user"), to: secret("me"), at: path("work"))
            login = try vault.node(at: path("login")).id
            sub = try vault.node(at: path("login/sub")).id
        }

        /// The searches compared locked and unlocked: (pairs, parent).
        var searches: [([Attribute], NodeID?)] {
            [([pair("service", "github"), pair("user", "me")], nil),
             ([pair("service", "github"), pair("user", "me")], login),
             ([pair("service", "github"), pair("user", "me")], sub),
             ([pair("service", "github")], nil),
             ([pair("user", "me")], .root),
             ([pair("service", "gitlab")], nil)]
        }
    }

    private func expectFindsWhileLocked(_ f: Fixture) throws {
        let vault = f.vault
        let both = [pair("service", "github"), pair("user", "me")]
        #expect(try vault.findLockedItems(both, in: nil) == [f.one, f.three, f.four])
        #expect(try vault.findLockedItems(both.reversed(), in: nil) == [f.one, f.three, f.four])
        #expect(try vault.findLockedItems(both, in: f.login) == [f.one])
        #expect(try vault.findLockedItems(both, in: f.sub) == [f.four])
        #expect(try vault.findLockedItems(both, in: .root).isEmpty)
        #expect(try vault.findLockedItems([pair("service", "github")], in: nil) == [f.one, f.two, f.three, f.four])
        #expect(try vault.findLockedItems([pair("service", "github")], in: f.login) == [f.one, f.two])
        #expect(try vault.findLockedItems([pair("user", "me")], in: .root) == [f.loose])
        #expect(try vault.findLockedItems([pair("service", "github"), pair("user", "you")], in: nil) == [f.two])
        #expect(try vault.findLockedItems([pair("service", "me")], in: nil) == [f.swapped])
        #expect(try vault.findLockedItems([pair("service", "gitlab")], in: nil).isEmpty)
        #expect(try vault.findLockedItems([pair("service", "github"), pair("user", "nobody")], in: nil).isEmpty)
        #expect(throws: VaultError.notADictionary("node \(f.loose)")) { try vault.findLockedItems(both, in: f.loose) }
        #expect(throws: VaultError.notFound("node \(NodeID(999))")) { try vault.findLockedItems(both, in: NodeID(999)) }
        #expect(throws: VaultError.invalidArgument("a search needs at least one attribute")) {
            try vault.findLockedItems([], in: nil)
        }
    }

    /// Nothing the search tags' key does not give is readable while locked.
    private func expectNothingElseReadable(_ f: Fixture) {
        let vault = f.vault
        #expect(vault.isLocked)
        #expect(throws: VaultError.locked) { _ = try vault.attributes(of: f.one) }
        #expect(throws: VaultError.locked) { _ = try vault.attributeNames(of: f.one) }
        #expect(throws: VaultError.locked) { _ = try vault.findItems([pair("service", "github")], in: nil) }
        #expect(throws: VaultError.locked) { _ = try vault.find([pair("service", "github")]) }
        #expect(throws: VaultError.locked) { _ = try vault.property(.label, of: f.one) }
        #expect(throws: VaultError.locked) { _ = try vault.item(f.two) }
    }

    @Test(arguments: StorageEngine.all)
    func lockedSearchFindsTheItemsHoldingEveryPair(engine: StorageEngine) throws {
        let f = try Fixture(engine)
        f.vault.lock()
        #expect(!f.vault.keepsAfterFirstUnlockKeys)
        try expectFindsWhileLocked(f)
        expectNothingElseReadable(f)
        // A repeated lock keeps the key.
        f.vault.lock()
        try expectFindsWhileLocked(f)
    }

    @Test(arguments: StorageEngine.all)
    func lockedSearchWithAfterFirstUnlockKeysKept(engine: StorageEngine) throws {
        let f = try Fixture(engine, accessibility: .afterFirstUnlock)
        f.vault.lock()
        #expect(f.vault.keepsAfterFirstUnlockKeys)
        try expectFindsWhileLocked(f)
        expectNothingElseReadable(f)
        // The after-first-unlock item itself reads, as before; its attributes do not.
        #expect(try f.vault.item(f.one).content.testBytes == Array("1".utf8))
        #expect(throws: VaultError.locked) { _ = try f.vault.attributes(of: f.one) }
    }

    @Test(arguments: StorageEngine.all)
    func unlockedItIsTheAuthenticatedSearch(engine: StorageEngine) throws {
        let f = try Fixture(engine)
        for (pairs, parent) in f.searches {
            #expect(try f.vault.findLockedItems(pairs, in: parent) == f.vault.findItems(pairs, in: parent))
        }
        f.vault.lock()
        let locked = try f.searches.map { try f.vault.findLockedItems($0.0, in: $0.1) }
        try f.vault.unlock(passphrase: secret(passphrase))
        for ((pairs, parent), whileLocked) in zip(f.searches, locked) {
            let authenticated = try f.vault.findItems(pairs, in: parent)
            #expect(try f.vault.findLockedItems(pairs, in: parent) == authenticated)
            #expect(whileLocked == authenticated)
        }
        #expect(throws: VaultError.invalidArgument("a search needs at least one attribute")) {
            try f.vault.findLockedItems([], in: f.login)
        }
    }

    @Test(arguments: StorageEngine.all)
    func anUnmountsLockWipesTheSearchKey(engine: StorageEngine) throws {
        let f = try Fixture(engine, accessibility: .afterFirstUnlock)
        let both = [pair("service", "github"), pair("user", "me")]
        f.vault.lock()
        #expect(try f.vault.findLockedItems(both, in: nil) == [f.one, f.three, f.four])
        f.vault.lock(keepingAfterFirstUnlock: false)
        #expect(throws: VaultError.locked) { try f.vault.findLockedItems(both, in: nil) }
        // A later ordinary lock has no key to keep.
        f.vault.lock()
        #expect(throws: VaultError.locked) { try f.vault.findLockedItems(both, in: nil) }
        // Straight from unlocked as well.
        try f.vault.unlock(passphrase: secret(passphrase))
        f.vault.lock(keepingAfterFirstUnlock: false)
        #expect(throws: VaultError.locked) { try f.vault.findLockedItems(both, in: nil) }
        try f.vault.unlock(passphrase: secret(passphrase))
        f.vault.lock()
        #expect(try f.vault.findLockedItems(both, in: f.login) == [f.one])
    }

    @Test(arguments: StorageEngine.all)
    func openedLockedThereIsNoSearchKeyUntilAnUnlock(engine: StorageEngine) throws {
        let f = try Fixture(engine)
        let vault = try Vault.openLocked(at: f.scratch.vaultPath)
        let both = [pair("service", "github"), pair("user", "me")]
        #expect(throws: VaultError.locked) { try vault.findLockedItems(both, in: nil) }
        vault.lock()
        #expect(throws: VaultError.locked) { try vault.findLockedItems(both, in: nil) }
        try vault.unlock(passphrase: secret(passphrase))
        vault.lock()
        #expect(try vault.findLockedItems(both, in: nil) == [f.one, f.three, f.four])
    }

    /// What the answers being candidates means: attribute rows copied onto another item in the
    /// file make it one while locked; after the unlock the authenticated search refuses them.
    @Test(arguments: StorageEngine.all)
    func aForgedRowMakesACandidateOnlyWhileLocked(engine: StorageEngine) throws {
        let f = try Fixture(engine)
        let both = [pair("service", "github"), pair("user", "me")]
        f.vault.lock()
        try f.scratch.rawRows().insertCopies("attributes", setting: "node", to: f.swapped.rawValue,
                                             keeping: ["tag", "search_tag", "name", "value"], where: "node = \(f.one.rawValue)")
        #expect(try f.vault.findLockedItems(both, in: nil) == [f.one, f.three, f.four, f.swapped])
        try f.vault.unlock(passphrase: secret(passphrase))
        #expect(throws: VaultError.integrityFailure("node \(f.swapped) (attributes)")) { try f.vault.findItems(both, in: nil) }
    }
}
