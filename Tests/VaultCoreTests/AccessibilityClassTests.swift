import Foundation
import Glibc
import Testing
@testable import VaultCore

private func name(_ text: String) -> ItemName { try! ItemName(text) }

private let classFixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures").path

private func classFixturePassphrase() throws -> SecureBuffer {
    var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: classFixtures + "/v1.passphrase")))
    if bytes.last == 0x0A { bytes.removeLast() }
    return secret(bytes)
}

/// Every test here that touches a this-device-only item points KEYCHAINFS_HOST_KEY at a scratch
/// file first; they run one at a time, since the variable is the process's.
@Suite(.serialized) struct AccessibilityClassTests {
    @Test(arguments: StorageEngine.all)
    func classesRoundTripAndDictionaryDefaultsApplyToNewItems(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        setenv("KEYCHAINFS_HOST_KEY", scratch.directory + "/host.key", 1)
        defer { unsetenv("KEYCHAINFS_HOST_KEY") }
        let vault = try makeVault(scratch)
        try vault.store(secret("plain"), at: path("a/plain"))
        try vault.store(secret("service"), at: path("a/service"), accessibility: .afterFirstUnlock)
        try vault.store(secret("local"), at: path("a/local"), accessibility: .thisDeviceOnly)
        #expect(try vault.node(at: path("a/plain")).attributes.accessibility == .whenUnlocked)
        #expect(try vault.node(at: path("a/service")).attributes.accessibility == .afterFirstUnlock)
        #expect(try vault.node(at: path("a/local")).attributes.accessibility == .thisDeviceOnly)
        // A replaced item keeps its class unless one is given.
        try vault.store(secret("service 2"), at: path("a/service"))
        #expect(try vault.node(at: path("a/service")).attributes.accessibility == .afterFirstUnlock)
        try vault.setClass(.thisDeviceOnly, at: path("a/plain"))
        try vault.setClass(.whenUnlocked, at: path("a/local"))

        // Defaults: the nearest dictionary up the path decides, for the CLI and for creation by id.
        try vault.setClass(.afterFirstUnlock, at: path("a"))
        try vault.makeDictionary(at: path("a/b/c"), withIntermediates: true)
        try vault.store(secret("x"), at: path("a/b/c/new"))
        #expect(try vault.node(at: path("a/b/c/new")).attributes.accessibility == .afterFirstUnlock)
        try vault.setClass(.thisDeviceOnly, at: path("a/b"))
        let c = try vault.node(at: path("a/b/c")).id
        let created = try vault.createItem(named: name("mounted"), in: c, content: secret("m"))
        #expect(created.attributes.accessibility == .thisDeviceOnly)
        #expect(try vault.effectiveDefaultClass(at: path("a/b/c")) == .thisDeviceOnly)
        try vault.setClass(nil, at: path("a/b"))
        #expect(try vault.effectiveDefaultClass(at: path("a/b/c")) == .afterFirstUnlock)
        #expect(try vault.node(at: path("a/b")).attributes.defaultClass == nil)
        #expect(throws: VaultError.self) { try vault.setClass(nil, at: path("a/plain")) }

        let reopened = try reopen(scratch)
        #expect(try reopened.read(path("a/plain")).testBytes == Array("plain".utf8))
        #expect(try reopened.read(path("a/service")).testBytes == Array("service 2".utf8))
        #expect(try reopened.read(path("a/local")).testBytes == Array("local".utf8))
        #expect(try reopened.read(path("a/b/c/mounted")).testBytes == Array("m".utf8))
        #expect(try reopened.node(at: path("a/plain")).attributes.accessibility == .thisDeviceOnly)
        #expect(try reopened.node(at: path("a/local")).attributes.accessibility == .whenUnlocked)
        #expect(try reopened.node(at: path("a")).attributes.defaultClass == .afterFirstUnlock)
        #expect(try reopened.verify().isEmpty)
    }

    @Test(arguments: StorageEngine.all)
    func aLockKeepsOnlyWhatAfterFirstUnlockItemsNeed(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        try vault.store(secret("canary"), at: path("apps/plain"))
        try vault.store(secret("unlocked"), at: path("apps/svc/token"), accessibility: .afterFirstUnlock)
        let apps = try vault.node(at: path("apps")).id
        let svc = try vault.node(at: path("apps/svc")).id
        let token = try vault.node(at: path("apps/svc/token")).id
        let plain = try vault.node(at: path("apps/plain")).id

        vault.lock()
        #expect(vault.isLocked && vault.keepsAfterFirstUnlockKeys)
        // By path, through dictionaries, to the after-first-unlock item only.
        #expect(try vault.lookup(name("apps"), in: .root).id == apps)
        #expect(try vault.lookup(name("svc"), in: apps).id == svc)
        #expect(try vault.lookup(name("token"), in: svc).id == token)
        #expect(throws: VaultError.locked) { try vault.lookup(name("plain"), in: apps) }
        #expect(throws: VaultError.locked) { try vault.lookup(name("missing"), in: apps) }
        #expect(throws: VaultError.locked) { try vault.node(plain) }
        #expect(throws: VaultError.locked) { try vault.item(plain) }
        #expect(throws: VaultError.locked) { try vault.entries(of: apps) }
        #expect(throws: VaultError.locked) { try vault.read(path("apps/svc/token")) }
        #expect(throws: VaultError.locked) { try vault.createItem(named: name("new"), in: svc, content: secret("n")) }
        #expect(throws: VaultError.locked) { try vault.changePassphrase(to: secret("other")) }
        #expect(try vault.item(token).content.testBytes == Array("unlocked".utf8))
        var written = secret("written while locked")
        _ = try vault.replaceContent(of: token, with: &written)
        #expect(try vault.item(token).content.testBytes == Array("written while locked".utf8))

        try vault.unlock(passphrase: secret(passphrase))
        #expect(!vault.isLocked && !vault.keepsAfterFirstUnlockKeys)
        #expect(try vault.read(path("apps/svc/token")).testBytes == Array("written while locked".utf8))
        #expect(try vault.read(path("apps/plain")).testBytes == Array("canary".utf8))

        // Unmount: nothing kept.
        vault.lock(keepingAfterFirstUnlock: false)
        #expect(throws: VaultError.locked) { try vault.item(token) }
        #expect(throws: VaultError.locked) { try vault.lookup(name("apps"), in: .root) }
    }

    @Test(arguments: StorageEngine.all)
    func withoutAfterFirstUnlockItemsALockKeepsNothing(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        try vault.store(secret("x"), at: path("plain"))
        vault.lock()
        #expect(vault.isLocked && !vault.keepsAfterFirstUnlockKeys)
        #expect(throws: VaultError.locked) { try vault.lookup(name("plain"), in: .root) }
    }

    /// The path to an item made after-first-unlock is sealed again in the current layout where
    /// it was older (a format 2 vault's dictionaries), so a lock can walk it.
    @Test func anUpgradedVaultsPathIsWalkableWhileLockedOnceAnItemIsAfterFirstUnlock() throws {
        let scratch = Scratch()
        try FileManager.default.copyItem(atPath: classFixtures + "/v2.vault", toPath: scratch.vaultPath)
        let vault = try Vault.open(at: scratch.vaultPath, passphrase: try classFixturePassphrase())
        try vault.setClass(.afterFirstUnlock, at: path("mail/work/password"))
        let work = try vault.node(at: path("mail/work")).id
        let item = try vault.node(at: path("mail/work/password")).id
        vault.lock()
        #expect(try vault.lookup(name("mail"), in: .root).kind == .dictionary)
        #expect(try vault.lookup(name("password"), in: work).id == item)
        #expect(try vault.item(item).content.testBytes == Array("line one\nline two\n".utf8))
        #expect(throws: VaultError.locked) { try vault.lookup(name("app"), in: .root) }  // layout 2: its key is gone
    }

    /// The class is bound into the content: after a class change (which keeps the content's
    /// generation), the old attributes with the new content, or the new attributes with the old
    /// content, fail to open.
    @Test func aContentRelabelledToAnotherClassFailsIntegrity() throws {
        let scratch = Scratch()
        var id: Int64 = 0
        var before: (attributes: [UInt8], content: [UInt8]) = ([], [])
        var after: (attributes: [UInt8], content: [UInt8]) = ([], [])
        func row(_ id: Int64) -> ([UInt8], [UInt8]) {
            withRawDatabase(scratch.vaultPath) { db in
                (rawBlobs(db, "SELECT id, attributes FROM nodes WHERE id = \(id)")[0].1,
                 rawBlobs(db, "SELECT id, content FROM nodes WHERE id = \(id)")[0].1)
            }
        }
        do {
            let vault = try makeVault(scratch)
            id = try vault.store(secret("service secret"), at: path("svc"), accessibility: .afterFirstUnlock).id.rawValue
        }
        before = row(id)
        do {
            let vault = try reopen(scratch)
            try vault.setClass(.whenUnlocked, at: path("svc"))
        }
        after = row(id)
        for (attributes, content) in [(before.attributes, after.content), (after.attributes, before.content)] {
            withRawDatabase(scratch.vaultPath) { db in
                rawSetBlob(db, column: "attributes", id: id, attributes)
                rawSetBlob(db, column: "content", id: id, content)
            }
            let vault = try reopen(scratch)
            #expect(throws: VaultError.integrityFailure("svc")) { try vault.read(path("svc")) }
            #expect(!(try vault.verify().isEmpty))
        }
    }

    @Test func thisDeviceOnlyNeedsTheHostKeyItWasSealedWith() throws {
        let scratch = Scratch()
        let first = scratch.directory + "/state/nested/host.key"
        let second = scratch.directory + "/other/host.key"
        defer { unsetenv("KEYCHAINFS_HOST_KEY") }
        setenv("KEYCHAINFS_HOST_KEY", first, 1)
        do {
            let vault = try makeVault(scratch)
            try vault.store(secret("everywhere"), at: path("shared"))
            try vault.store(secret("only here"), at: path("local"), accessibility: .thisDeviceOnly)
            #expect(try vault.read(path("local")).testBytes == Array("only here".utf8))
        }
        var info = stat()
        #expect(stat(first, &info) == 0 && info.st_mode & 0o777 == 0o600 && info.st_size == 32)
        #expect(stat(scratch.directory + "/state/nested", &info) == 0 && info.st_mode & 0o777 == 0o700)
        #expect(stat(scratch.directory + "/state", &info) == 0 && info.st_mode & 0o777 == 0o700)

        setenv("KEYCHAINFS_HOST_KEY", second, 1)
        do {
            let elsewhere = try reopen(scratch)
            #expect(try elsewhere.read(path("shared")).testBytes == Array("everywhere".utf8))
            #expect(throws: VaultError.otherDevice("local")) { try elsewhere.read(path("local")) }
        }
        setenv("KEYCHAINFS_HOST_KEY", first, 1)
        #expect(try reopen(scratch).read(path("local")).testBytes == Array("only here".utf8))

        // A host key file that is not 32 bytes is refused, never padded or cut.
        try Data(repeating: 7, count: 31).write(to: URL(fileURLWithPath: second))
        setenv("KEYCHAINFS_HOST_KEY", second, 1)
        #expect(throws: VaultError.self) { try reopen(scratch).read(path("local")) }
    }
}
