import CSQLite
import Foundation
import Testing
import VaultCore

/// Tests/Fixtures: vaults of format versions 1, 2, 4 and 5 made by the last commits before versions 2, 3, 5 and 6.
private let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures").path

/// The fixture's passphrase, as the CLI reads the file (one trailing newline dropped).
private func fixturePassphrase() throws -> SecureBuffer {
    var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: fixtures + "/v1.passphrase")))
    if bytes.last == 0x0A { bytes.removeLast() }
    return secret(bytes)
}

/// What Tests/Fixtures/README.md lists. The unicode item's name holds the escapes literally
/// (backslash, x, c, 3...): the shell that made the fixture did not expand them.
private let fixtureItems: [String: [UInt8]] = [
    "app/token": Array("ghp_fixtureToken123".utf8),
    "app/empty": [],
    "app/nested/deep/big": [UInt8](repeating: 0x78, count: 5000),
    "unicode/n\\xc3\\xa4me with spaces": Array("héllo wörld\n".utf8),
    "top": Array("root item".utf8),
]

private let fixtureListings: [String: [String]] = [
    "": ["app/", "empty-dict/", "top", "unicode/"],
    "app": ["empty", "nested/", "token"],
    "app/nested": ["deep/"],
    "app/nested/deep": ["big"],
    "unicode": ["n\\xc3\\xa4me with spaces"],
    "empty-dict": [],
]

/// The format version this code writes; opening an older vault upgrades it to this in one step.
let currentFormat: Int64 = 11

private func copyFixture(to file: String, version: Int = 1) throws {
    try FileManager.default.copyItem(atPath: fixtures + "/v\(version).vault", toPath: file)
}

private func rawInteger(_ file: String, _ sql: String) -> Int64 {
    var db: OpaquePointer?
    precondition(sqlite3_open_v2(file, &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK)
    defer { sqlite3_close(db) }
    var statement: OpaquePointer?
    precondition(sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK)
    defer { sqlite3_finalize(statement) }
    precondition(sqlite3_step(statement) == SQLITE_ROW)
    return sqlite3_column_int64(statement, 0)
}

private func formatVersion(_ file: String) -> Int64 { rawInteger(file, "PRAGMA user_version") }

private func fileBytes(_ file: String) -> [UInt8] {
    (try? Data(contentsOf: URL(fileURLWithPath: file))).map(Array.init) ?? []
}

private func listing(_ vault: Vault, _ dictionary: String) throws -> [String] {
    try vault.list(dictionary.isEmpty ? .root : path(dictionary)).map {
        $0.name.description + ($0.node.kind == .dictionary ? "/" : "")
    }.sorted()
}

/// Everything the fixture holds, byte for byte, and a clean verify.
private func expectFixtureContents(_ vault: Vault) throws {
    for (itemPath, bytes) in fixtureItems {
        #expect(try vault.read(path(itemPath)).testBytes == bytes, "\(itemPath)")
    }
    for (dictionary, names) in fixtureListings {
        #expect(try listing(vault, dictionary) == names, "\(dictionary)/")
    }
    #expect(try vault.verify().isEmpty)
}

/// A tmpfs of our own (we run as root), so a full disk is real.
private final class TinyFilesystem {
    let mountpoint: String

    init(size: String) throws {
        mountpoint = NSTemporaryDirectory() + "vaultcore-tiny-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        #expect(try TinyFilesystem.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(size),mode=0700", "tmpfs", mountpoint]) == 0)
    }

    /// Fills what is left with a plain file, and returns its path.
    func fill() throws -> String {
        let filler = mountpoint + "/filler"
        _ = try TinyFilesystem.run("/bin/dd", ["if=/dev/zero", "of=\(filler)", "bs=4k"])
        return filler
    }

    static func run(_ executable: String, _ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit {
        _ = try? TinyFilesystem.run("/bin/umount", ["-l", mountpoint])
        try? FileManager.default.removeItem(atPath: mountpoint)
    }
}

@Suite struct FormatUpgradeTests {
    @Test func aVersion1VaultIsUpgradedOnOpenAndKeepsEverything() throws {
        let scratch = Scratch()
        try copyFixture(to: scratch.vaultPath)
        let startedAt = Timestamp.now()

        let vault = try Vault.open(at: scratch.vaultPath, passphrase: try fixturePassphrase())
        #expect(formatVersion(scratch.vaultPath) == currentFormat)
        try expectFixtureContents(vault)

        // Modes and times come through the upgrade: the fixture was made long before this
        // test, and the access time starts as the modification time.
        for (itemPath, _) in fixtureItems {
            let attributes = try vault.node(at: path(itemPath)).attributes
            #expect(attributes.mode == 0o600, "\(itemPath)")
            #expect(attributes.modified < startedAt && attributes.changed < startedAt, "\(itemPath)")
            #expect(attributes.modified.seconds > 1_790_000_000, "\(itemPath): \(attributes.modified)")
            #expect(attributes.accessed == attributes.modified, "\(itemPath)")
            #expect(attributes.subdictionaries == 0, "\(itemPath)")
        }
        let subdictionaries = ["": 3, "app": 1, "app/nested": 1, "app/nested/deep": 0, "unicode": 0, "empty-dict": 0]
        for (dictionary, count) in subdictionaries {
            let attributes = try vault.node(at: dictionary.isEmpty ? .root : path(dictionary)).attributes
            #expect(attributes.subdictionaries == count, "\(dictionary)/")
            #expect(attributes.mode == 0o700, "\(dictionary)/")
            #expect(attributes.modified < startedAt, "\(dictionary)/")
        }
    }

    @Test func openingAgainDoesNotUpgradeAgain() throws {
        let scratch = Scratch()
        try copyFixture(to: scratch.vaultPath)
        _ = try Vault.open(at: scratch.vaultPath, passphrase: try fixturePassphrase())
        let upgraded = withRawDatabase(scratch.vaultPath) { rawBlobs($0, "SELECT id, attributes FROM nodes ORDER BY id") }
        let reopened = try Vault.open(at: scratch.vaultPath, passphrase: try fixturePassphrase())
        #expect(withRawDatabase(scratch.vaultPath) { rawBlobs($0, "SELECT id, attributes FROM nodes ORDER BY id") }
            .map(\.1) == upgraded.map(\.1))
        #expect(formatVersion(scratch.vaultPath) == currentFormat)
        try expectFixtureContents(reopened)
    }

    @Test func checkingOrAWrongPassphraseLeavesAVersion1VaultUntouched() throws {
        let scratch = Scratch()
        try copyFixture(to: scratch.vaultPath)
        let before = fileBytes(scratch.vaultPath)
        try Vault.checkOpenable(at: scratch.vaultPath)
        #expect(throws: VaultError.wrongPassphrase) { try Vault.open(at: scratch.vaultPath, passphrase: secret("not it")) }
        #expect(fileBytes(scratch.vaultPath) == before)
        #expect(!FileManager.default.fileExists(atPath: scratch.vaultPath + "-wal"))
        #expect(formatVersion(scratch.vaultPath) == 1)

        let vault = try Vault.open(at: scratch.vaultPath, passphrase: try fixturePassphrase())
        #expect(try vault.itemCount() == fixtureItems.count)
        try Vault.checkOpenable(at: scratch.vaultPath)
    }

    @Test(arguments: [false, true])
    func anUpgradeThatCannotBeWrittenLeavesVersion1AndSucceedsOnceThereIsRoom(walAlreadyThere: Bool) throws {
        let tiny = try TinyFilesystem(size: "256k")
        let file = tiny.mountpoint + "/v1.vault"
        try copyFixture(to: file)
        // With walAlreadyThere, another connection keeps the vault open in WAL mode (as a mount
        // of the last release would), so its -wal and -shm exist and the upgrade itself, not the
        // switch to WAL, is what finds no room.
        var other: OpaquePointer?
        if walAlreadyThere {
            #expect(sqlite3_open(file, &other) == SQLITE_OK)
            rawExec(other!, "PRAGMA journal_mode = WAL")
            rawExec(other!, "SELECT count(*) FROM nodes")
        }
        defer { sqlite3_close(other) }
        let before = fileBytes(file)
        let filler = try tiny.fill()

        let passphrase = try fixturePassphrase()
        do throws(VaultError) {
            _ = try Vault.open(at: file, passphrase: passphrase)
            Issue.record("the upgrade succeeded on a full disk")
        } catch .formatUpgradeFailed(let failedPath, let version, let target, let reason) {
            #expect(failedPath == file && version == 1 && Int64(target) == currentFormat, "\(reason)")
        } catch {
            Issue.record("failed with \(error), not formatUpgradeFailed")
        }
        let message = VaultError.formatUpgradeFailed(path: file, version: 1, target: 2, reason: "x").description
        #expect(message.contains("unchanged and still format version 1"))
        #expect(fileBytes(file) == before)
        try Vault.checkOpenable(at: file)

        try FileManager.default.removeItem(atPath: filler)
        #expect(formatVersion(file) == 1)
        sqlite3_close(other)
        other = nil
        let vault = try Vault.open(at: file, passphrase: try fixturePassphrase())
        #expect(formatVersion(file) == currentFormat)
        try expectFixtureContents(vault)
    }

    @Test func subdictionaryCountsFollowEveryChange() throws {
        let scratch = Scratch()
        try copyFixture(to: scratch.vaultPath)
        let vault = try Vault.open(at: scratch.vaultPath, passphrase: try fixturePassphrase())
        func subdictionaries(_ dictionary: String) throws -> Int {
            try vault.node(at: dictionary.isEmpty ? .root : path(dictionary)).attributes.subdictionaries
        }

        try vault.makeDictionary(at: path("app/x/y/z"), withIntermediates: true)     // mkdir -p
        #expect(try subdictionaries("app") == 2 && subdictionaries("app/x") == 1 && subdictionaries("app/x/y") == 1)
        try vault.move(path("app/x"), to: path("unicode"))                           // into another dictionary
        #expect(try subdictionaries("app") == 1 && subdictionaries("unicode") == 1)
        try vault.move(path("unicode/x"), to: path("unicode/renamed"))              // same dictionary
        #expect(try subdictionaries("unicode") == 1)
        let unicode = try vault.node(at: path("unicode")).id
        let emptyDict = try ItemName("empty-dict")
        _ = try vault.makeDictionary(named: try ItemName("gone"), in: unicode)
        try vault.move(try ItemName("gone"), from: unicode, to: emptyDict, in: .root)  // replaces an empty dictionary
        #expect(try subdictionaries("") == 3 && subdictionaries("unicode") == 1)
        try vault.remove(named: emptyDict, in: .root, kind: .dictionary)                    // rmdir
        #expect(try subdictionaries("") == 2)
        try vault.remove(path("unicode/renamed"), recursive: true)                   // rm -r
        #expect(try subdictionaries("unicode") == 0)
        try vault.store(secret("v"), at: path("new/item"))                           // set with missing parents
        #expect(try subdictionaries("") == 3 && subdictionaries("new") == 0)
        try vault.remove(path("top"), recursive: false)                              // items do not count
        #expect(try subdictionaries("") == 3)
        #expect(try vault.verify().isEmpty)
    }

    @Test func accessTimeIsSetAtCreationAndBySetAttributesOnly() throws {
        let scratch = Scratch()
        let vault = try makeVault(scratch)
        let created = try vault.store(secret("first"), at: path("a"))
        #expect(created.attributes.accessed == created.attributes.modified)
        #expect(created.attributes.changed == created.attributes.modified)

        let atime = Timestamp(seconds: 1_000_000_000, nanoseconds: 123_456_789)
        let mtime = Timestamp(seconds: 1_100_000_000, nanoseconds: 987_654_321)
        let set = try vault.setAttributes(of: created.id, modified: mtime, accessed: atime)
        #expect(set.attributes.accessed == atime && set.attributes.modified == mtime)
        #expect(set.attributes.changed >= created.attributes.changed)

        var content = secret("second")
        let written = try vault.replaceContent(of: created.id, with: &content)
        #expect(written.attributes.accessed == atime)
        #expect(written.attributes.modified > mtime)
        _ = try vault.read(path("a"))
        let reread = try reopen(scratch).node(at: path("a")).attributes
        #expect(reread.accessed == atime)
        #expect(reread.modified == written.attributes.modified)
    }

    /// 1 -> 3 in one open: the upgraded vault holds attributes like a new one.
    @Test func anUpgradedVersion1VaultTakesAttributes() throws {
        let scratch = Scratch()
        try copyFixture(to: scratch.vaultPath)
        let vault = try Vault.open(at: scratch.vaultPath, passphrase: try fixturePassphrase())
        #expect(formatVersion(scratch.vaultPath) == currentFormat)
        try vault.setAttribute(try AttributeName("service"), to: secret("github"), at: path("app/token"))
        #expect(try vault.find([Attribute(name: try AttributeName("service"), value: secret("github"))]) == [path("app/token")])
        try expectFixtureContents(try Vault.open(at: scratch.vaultPath, passphrase: try fixturePassphrase()))
    }

    @Test func aVersion2VaultIsUpgradedOnOpenAndKeepsEverything() throws {
        let scratch = Scratch()
        try copyFixture(to: scratch.vaultPath, version: 2)
        #expect(formatVersion(scratch.vaultPath) == 2)
        #expect(rawInteger(scratch.vaultPath, "SELECT count(*) FROM sqlite_master WHERE name = 'attributes'") == 0)
        func columns() -> [[UInt8]] {
            withRawDatabase(scratch.vaultPath) { db in
                ["name", "attributes", "coalesce(content, x'')"].flatMap { rawBlobs(db, "SELECT id, \($0) FROM nodes ORDER BY id").map(\.1) }
            }
        }
        let before = columns()

        let vault = try Vault.open(at: scratch.vaultPath, passphrase: try fixturePassphrase())
        #expect(formatVersion(scratch.vaultPath) == currentFormat)
        // Nothing is re-encrypted: version 3 only adds a table.
        #expect(columns() == before)
        #expect(try vault.read(path("app/token")).testBytes == Array("ghp_v2FixtureToken".utf8))
        #expect(try vault.read(path("app/empty")).testBytes == [])
        #expect(try vault.read(path("mail/work/password")).testBytes == Array("line one\nline two\n".utf8))
        #expect(try listing(vault, "") == ["app/", "empty-dict/", "mail/"])
        #expect(try vault.verify().isEmpty)
        // Layout 2 records read as when-unlocked items and dictionaries without a default.
        #expect(try vault.node(at: path("app/token")).attributes.accessibility == .whenUnlocked)
        #expect(try vault.node(at: path("app")).attributes.defaultClass == nil)

        try vault.setAttribute(try AttributeName("account"), to: secret("me@work"), at: path("mail/work/password"))
        let reopened = try Vault.open(at: scratch.vaultPath, passphrase: try fixturePassphrase())
        #expect(try reopened.attribute(try AttributeName("account"), at: path("mail/work/password")).testBytes == Array("me@work".utf8))
        #expect(try reopened.verify().isEmpty)
    }

    @Test(arguments: [2, 4])
    func anUpgradeThatCannotBeWrittenLeavesTheOlderVersion(version: Int64) throws {
        let tiny = try TinyFilesystem(size: "256k")
        let file = tiny.mountpoint + "/v\(version).vault"
        try copyFixture(to: file, version: Int(version))
        let before = fileBytes(file)
        let filler = try tiny.fill()
        let passphrase = try fixturePassphrase()
        do throws(VaultError) {
            _ = try Vault.open(at: file, passphrase: passphrase)
            Issue.record("the upgrade succeeded on a full disk")
        } catch .formatUpgradeFailed(_, let found, let target, _) {
            #expect(Int64(found) == version && Int64(target) == currentFormat)
        } catch {
            Issue.record("failed with \(error), not formatUpgradeFailed")
        }
        #expect(fileBytes(file) == before)
        #expect(formatVersion(file) == version)
        try FileManager.default.removeItem(atPath: filler)
        _ = try Vault.open(at: file, passphrase: try fixturePassphrase())
        #expect(formatVersion(file) == currentFormat)
    }

    /// Every record of the file, sealed as it is: what an upgrade that re-encrypts nothing keeps.
    /// The access log's batches but their sealed column: the upgrade to 11 seals them again,
    /// chained (`aVersion10VaultsLogIsChainedAt11`).
    private func records(_ file: String) -> [[UInt8]] {
        let columns = [
            ("nodes", "id", ["parent", "kind", "incarnation", "name_tag", "name", "attributes", "coalesce(content, x'')"]),
            ("attributes", "node", ["tag", "search_tag", "name", "value"]),
            ("rules", "node", ["sealed"]),
            ("access_log", "sequence", ["first_time", "last_time", "entries"]),
            ("key_slots", "id", ["kdf_algorithm", "kdf_opslimit", "kdf_memlimit", "salt", "wrapped_master_key"]),
            ("vault", "singleton", ["vault_id", "item_size_limit", "next_node_id", "rules_mac"]),
        ]
        return withRawDatabase(file) { db in
            columns.flatMap { table, key, values in
                values.flatMap { value in
                    rawBlobs(db, "SELECT \(key), CAST(\(value) AS BLOB) FROM \(table) ORDER BY \(key), CAST(\(value) AS BLOB)")
                        .map { withUnsafeBytes(of: $0.0) { Array($0) } + $0.1 }
                }
            }
        }
    }

    private func headerMAC(_ file: String) -> [UInt8] {
        withRawDatabase(file) { rawBlobs($0, "SELECT 1, header_mac FROM vault") }.first?.1 ?? []
    }

    /// 4 -> 5 (and on to 6): the number and the header's MAC change, in the transaction of
    /// every upgrade; no record does (a vault of 4 has no item properties, nor members).
    @Test func aVersion4VaultIsUpgradedTo5AndKeepsItsRecords() throws {
        let scratch = Scratch()
        try copyFixture(to: scratch.vaultPath, version: 4)
        #expect(formatVersion(scratch.vaultPath) == 4)
        let before = records(scratch.vaultPath)
        #expect(before.count > 30)
        let macBefore = headerMAC(scratch.vaultPath)

        let vault = try Vault.open(at: scratch.vaultPath, passphrase: try fixturePassphrase())
        #expect(formatVersion(scratch.vaultPath) == currentFormat)
        #expect(records(scratch.vaultPath) == before)
        #expect(headerMAC(scratch.vaultPath).count == macBefore.count && headerMAC(scratch.vaultPath) != macBefore)

        #expect(try vault.read(path("app/token")).testBytes == Array("ghp_v4FixtureToken".utf8))
        #expect(try vault.read(path("app/session")).testBytes == Array("s".utf8))
        #expect(try vault.node(at: path("app/session")).attributes.accessibility == .afterFirstUnlock)
        #expect(try vault.read(path("mail/work/password")).testBytes == Array("pw4".utf8))
        #expect(try vault.attribute(try AttributeName("service"), at: path("mail/work/password")).testBytes == Array("mail".utf8))
        #expect(try listing(vault, "") == ["app/", "empty-dict/", "mail/"])
        #expect(try vault.ruleSets().map(\.path) == [path("app")])
        #expect(try vault.accessLog().problems.isEmpty)
        #expect(try vault.verify().isEmpty)

        let reopened = try Vault.open(at: scratch.vaultPath, passphrase: try fixturePassphrase())
        #expect(records(scratch.vaultPath) == before)
        #expect(try reopened.verify().isEmpty)
    }

    /// The number and the MAC go together: an upgraded vault set back to 4, or a vault of 4
    /// numbered 5 by hand (never upgraded), is refused as tampered.
    @Test func aVersion4VaultsNumberAndHeaderAreOnlyAcceptedTogether() throws {
        let upgraded = Scratch()
        try copyFixture(to: upgraded.vaultPath, version: 4)
        _ = try Vault.open(at: upgraded.vaultPath, passphrase: try fixturePassphrase())
        withRawDatabase(upgraded.vaultPath) { rawExec($0, "PRAGMA user_version = 4") }
        #expect(throws: VaultError.integrityFailure("vault header (the format version was set back to 4)")) {
            try Vault.open(at: upgraded.vaultPath, passphrase: try fixturePassphrase())
        }
        #expect(formatVersion(upgraded.vaultPath) == 4)

        let renumbered = Scratch()
        try copyFixture(to: renumbered.vaultPath, version: 4)
        withRawDatabase(renumbered.vaultPath) { rawExec($0, "PRAGMA user_version = 5") }
        #expect(throws: VaultError.integrityFailure("vault header (the format version was set to 5, sealed as 4)")) {
            try Vault.open(at: renumbered.vaultPath, passphrase: try fixturePassphrase())
        }
    }

    /// Item properties need the keys, and every way to the keys (`create`, `open`, `unlock`)
    /// goes through the upgrade: a vault of 4 opened locked takes none, and is current once unlocked.
    @Test func aVersion4VaultTakesPropertiesOnlyOnceUpgraded() throws {
        let scratch = Scratch()
        try copyFixture(to: scratch.vaultPath, version: 4)
        let vault = try Vault.openLocked(at: scratch.vaultPath)
        #expect(throws: VaultError.locked) { try vault.setProperty(.label, to: secret("Vault"), of: .root) }
        #expect(formatVersion(scratch.vaultPath) == 4)

        try vault.unlock(passphrase: try fixturePassphrase())
        #expect(formatVersion(scratch.vaultPath) == currentFormat)
        try vault.setProperty(.label, to: secret("GitHub token"), at: path("app/token"))
        let reopened = try Vault.open(at: scratch.vaultPath, passphrase: try fixturePassphrase())
        #expect(try reopened.property(.label, at: path("app/token"))?.testBytes == Array("GitHub token".utf8))
        #expect(try reopened.verify().isEmpty)
    }

    /// 5 -> 6: the storage adds the (empty) table of member slots; no record changes, the
    /// number and the header's MAC do, and members can be added once it is upgraded.
    @Test func aVersion5VaultIsUpgradedTo6AndTakesMembers() throws {
        let scratch = Scratch()
        try copyFixture(to: scratch.vaultPath, version: 5)
        #expect(formatVersion(scratch.vaultPath) == 5)
        let before = records(scratch.vaultPath)
        let macBefore = headerMAC(scratch.vaultPath)

        let vault = try Vault.open(at: scratch.vaultPath, passphrase: try fixturePassphrase())
        #expect(formatVersion(scratch.vaultPath) == currentFormat)
        #expect(records(scratch.vaultPath) == before)
        #expect(headerMAC(scratch.vaultPath).count == macBefore.count && headerMAC(scratch.vaultPath) != macBefore)
        #expect(try vault.read(path("app/token")).testBytes == Array("ghp_v5FixtureToken".utf8))
        #expect(try vault.property(.label, at: path("app/token"))?.testBytes == Array("Token five".utf8))
        #expect(try vault.keySlots() == [.passphrase(id: 1)])
        #expect(try vault.verify().isEmpty)

        let memberFile = scratch.directory + "/member.key"
        try MemberKey.create(at: memberFile, passphrase: try fixturePassphrase(), kdf: KDFPreset.interactive.parameters)
        let member = try MemberKey.open(at: memberFile, passphrase: try fixturePassphrase())
        try vault.addMember(name: "m", publicKey: member.publicKey)
        #expect(try Vault.open(at: scratch.vaultPath, member: member).read(path("mail/work/password")).testBytes == Array("pw5".utf8))

        withRawDatabase(scratch.vaultPath) { rawExec($0, "PRAGMA user_version = 5") }
        #expect(throws: VaultError.integrityFailure("vault header (the format version was set back to 5)")) {
            try Vault.open(at: scratch.vaultPath, passphrase: try fixturePassphrase())
        }
    }

    /// 6 -> 7: each member slot gets its MAC, whether a member or a passphrase opens the vault
    /// first; the member opens it before and after, and a slot then stripped of its MAC, or one
    /// added without the master key, is refused.
    @Test func aVersion6VaultsMemberSlotsGetTheirMACAt7() throws {
        for openedBy in ["member", "passphrase"] {
            let scratch = Scratch()
            try copyFixture(to: scratch.vaultPath, version: 6)
            #expect(formatVersion(scratch.vaultPath) == 6)
            let slotLength = rawInteger(scratch.vaultPath, "SELECT length(sealed_master_key) FROM member_slots")
            let ann = try MemberKey.open(at: fixtures + "/v6.member.key", passphrase: try fixturePassphrase())

            let vault = openedBy == "member" ? try Vault.open(at: scratch.vaultPath, member: ann)
                                             : try Vault.open(at: scratch.vaultPath, passphrase: try fixturePassphrase())
            #expect(formatVersion(scratch.vaultPath) == currentFormat)
            #expect(rawInteger(scratch.vaultPath, "SELECT length(sealed_master_key) FROM member_slots") == slotLength + 32)
            #expect(try vault.read(path("app/token")).testBytes == Array("ghp_v6FixtureToken".utf8))
            #expect(try vault.keySlots().count == 2)
            #expect(try vault.verify().isEmpty)
            #expect(try Vault.open(at: scratch.vaultPath, member: ann).read(path("app/token")).testBytes == Array("ghp_v6FixtureToken".utf8))

            // Stripped of its MAC, the slot is what format 6 stored: at 7 it is refused.
            withRawDatabase(scratch.vaultPath) {
                rawExec($0, "UPDATE member_slots SET sealed_master_key = substr(sealed_master_key, 1, \(slotLength))")
            }
            #expect(throws: VaultError.self) { try Vault.open(at: scratch.vaultPath, member: ann) }
        }
    }

    /// 7 -> 8: the generation starts (1, sealed by the upgrade's write), the members' MAC covers
    /// the slot there is, and each later write raises the generation; the rule and the member
    /// stay; a member opens the vault after the upgrade. Rules and their MAC set back to none
    /// (what the vault had before its rule) are then refused.
    @Test func aVersion7VaultGetsItsGenerationAt8() throws {
        let scratch = Scratch()
        try copyFixture(to: scratch.vaultPath, version: 7)
        #expect(formatVersion(scratch.vaultPath) == 7)
        let before = records(scratch.vaultPath)

        let vault = try Vault.open(at: scratch.vaultPath, passphrase: try fixturePassphrase())
        #expect(formatVersion(scratch.vaultPath) == currentFormat)
        #expect(records(scratch.vaultPath) == before)
        #expect(rawInteger(scratch.vaultPath, "SELECT generation FROM vault") == 1)
        #expect(try vault.read(path("app/token")).testBytes == Array("ghp_v7FixtureToken".utf8))
        #expect(try vault.ruleSets().count == 1)
        #expect(try vault.keySlots().count == 2)
        #expect(try vault.verify().isEmpty)
        try vault.store(secret("m"), at: path("app/more"))
        #expect(rawInteger(scratch.vaultPath, "SELECT generation FROM vault") > 1)

        let bob = try MemberKey.open(at: fixtures + "/v7.member.key", passphrase: try fixturePassphrase())
        #expect(try Vault.open(at: scratch.vaultPath, member: bob).read(path("mail/work/password")).testBytes == Array("pw7".utf8))

        withRawDatabase(scratch.vaultPath) { rawExec($0, "DELETE FROM rules") }
        #expect(throws: VaultError.self) { try Vault.open(at: scratch.vaultPath, passphrase: try fixturePassphrase()).accessPolicy() }
    }

    /// 8 -> 10: the storage adds the tables of content blocks (9) and of TPM PIN slots (10); no
    /// record changes. The large item a format 8 vault stored whole still reads, and takes blocks
    /// when next written; opened with a PIN, the vault says it has no PIN slot (status 16's
    /// refusal), not that the PIN is wrong; the number set back to 8 is refused, as the header's
    /// MAC binds 10.
    @Test func aVersion8VaultsLargeItemReadsAndTakesBlocksAndItGetsPINSlots() throws {
        let scratch = Scratch()
        try copyFixture(to: scratch.vaultPath, version: 8)
        #expect(formatVersion(scratch.vaultPath) == 8)
        let before = records(scratch.vaultPath)
        let big = (0..<10_000).map { UInt8(($0 * 7) % 251) }

        let vault = try Vault.open(at: scratch.vaultPath, passphrase: try fixturePassphrase())
        #expect(formatVersion(scratch.vaultPath) == currentFormat)
        #expect(records(scratch.vaultPath) == before)
        #expect(rawInteger(scratch.vaultPath, "SELECT count(*) FROM content_blocks") == 0)
        #expect(try vault.read(path("app/big")).testBytes == big)
        #expect(try vault.read(path("app/token")).testBytes == Array("ghp_v8FixtureToken".utf8))
        #expect(try vault.verify().isEmpty)

        try vault.store(secret(big.reversed()), at: path("app/big"))
        #expect(rawInteger(scratch.vaultPath, "SELECT count(*) FROM content_blocks") == 3)
        #expect(try Vault.open(at: scratch.vaultPath, passphrase: try fixturePassphrase()).read(path("app/big")).testBytes == big.reversed())
        #expect(try vault.verify().isEmpty)
        #expect(rawInteger(scratch.vaultPath, "SELECT count(*) FROM pin_slots") == 0)
        #expect(try vault.read(path("mail/work/password")).testBytes == Array("pw8".utf8))
        #expect(try vault.pinSlotPCRs() == nil)
        #expect(throws: VaultError.pinSlotRefused(.noSlot)) { try Vault.open(at: scratch.vaultPath, pin: try fixturePassphrase()) }

        withRawDatabase(scratch.vaultPath) { rawExec($0, "PRAGMA user_version = 8") }
        #expect(throws: VaultError.self) { try Vault.open(at: scratch.vaultPath, passphrase: try fixturePassphrase()) }
    }
}
