import Foundation
import Testing
@testable import VaultCore

let headRule = AccessRule(try! Principal.executable(at: "/usr/bin/head"))
let nginxRule = AccessRule(.unit("nginx.service"), readOnly: true, confirm: true)

/// The rule rows as stored, by node.
func rawRuleRows(_ scratch: Scratch) throws -> [(Int64, [UInt8])] {
    try scratch.rawRows().blobs("rules", "sealed", key: "node", where: "true").map { ($0.0, $0.1 ?? []) }
}

/// Rules stored in the vault: sealed per node, listed by path, kept across renames, deleted
/// with their nodes.
@Suite struct RuleRecordTests {
    @Test(arguments: StorageEngine.all)
    func rulesRoundTripThroughTheVault(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        try vault.store(secret("t"), at: path("app/token"))
        try vault.store(secret("o"), at: path("other/token"))
        #expect(try !vault.accessPolicy().hasAnyRules)
        #expect(try vault.ruleSets().isEmpty)

        try vault.allow(headRule, at: path("app"))
        try vault.allow(nginxRule, at: path("app"))
        try vault.allow(AccessRule(.unit("backup.scope"), readOnly: true), at: path("other/token"))
        let app = try vault.node(at: path("app")).id, otherToken = try vault.node(at: path("other/token")).id

        let reopened = try reopen(scratch)
        let policy = try reopened.accessPolicy()
        #expect(policy.ruleSets.count == 2)
        #expect(policy.ruleSet(of: app)?.rules == [headRule, nginxRule])
        #expect(policy.ruleSet(of: otherToken)?.rules == [AccessRule(.unit("backup.scope"), readOnly: true)])
        #expect(try reopened.ruleSets().map(\.path) == [path("app"), path("other/token")])
        #expect(try reopened.ruleSets(at: path("other")).map(\.path) == [path("other/token")])
        #expect(try reopened.ruleSets(at: path("app/token")).isEmpty)
        #expect(try reopened.verify().isEmpty)

        // The same principal again replaces the earlier rule's flags, in place.
        try reopened.allow(AccessRule(headRule.principal, readOnly: true), at: path("app"))
        #expect(try reopened.accessPolicy().ruleSet(of: app)?.rules == [AccessRule(headRule.principal, readOnly: true), nginxRule])

        // Governing: an item below `app` is governed by app's set, read through storage.
        let token = try reopened.node(at: path("app/token")).id
        let current = try reopened.accessPolicy()
        #expect(try reopened.governingRuleSet(of: token, in: current)?.node == app)
        #expect(try reopened.governingRuleSet(of: .root, in: current) == nil)
        #expect(try reopened.governingRuleSet(of: token, in: .empty) == nil)

        try reopened.disallow(nginxRule.principal, at: path("app"))
        #expect(try reopened.accessPolicy().ruleSet(of: app)?.rules == [AccessRule(headRule.principal, readOnly: true)])
        #expect(throws: VaultError.noSuchRule("app, --unit nginx.service")) { try reopened.disallow(nginxRule.principal, at: path("app")) }
        try reopened.disallow(nil, at: path("app"))
        #expect(try reopened.accessPolicy().ruleSet(of: app) == nil)
        #expect(throws: VaultError.noSuchRule("app")) { try reopened.disallow(nil, at: path("app")) }
        #expect(throws: VaultError.notFound("missing")) { try reopened.allow(headRule, at: path("missing")) }
        #expect(try rawRuleRows(scratch).map(\.0) == [otherToken.rawValue])
        #expect(try reopen(scratch).verify().isEmpty)
    }

    @Test func theRecordLayoutRoundTripsAndRefusesAnythingElse() {
        let rules = [headRule, nginxRule, AccessRule(.executable(path: "/opt/ä b", device: .max, inode: 7, fingerprint: nil), readOnly: true),
                     AccessRule(.unit("x.scope"), confirm: true)]
        let encoded = RuleRecord.encode(rules)
        #expect(RuleRecord.decode(encoded) == rules)
        #expect(RuleRecord.decode(RuleRecord.encode([])) == [])
        #expect(RuleRecord.decode(encoded + [0]) == nil, "trailing bytes")
        #expect(RuleRecord.decode(Array(encoded.dropLast())) == nil, "cut short")
        #expect(encoded.first == 2, "a fingerprinted rule: layout 2")
        #expect(RuleRecord.decode([3] + encoded.dropFirst()) == nil, "another layout")
        #expect(RuleRecord.decode([1] + encoded.dropFirst()) == nil, "layout 2 read as 1")
        // A record of rules made before fingerprints: layout 1, which older versions read, and
        // read back without fingerprints.
        let old = [AccessRule(.executable(path: "/usr/bin/head", device: 1, inode: 2, fingerprint: nil)), nginxRule]
        #expect(RuleRecord.encode(old).first == 1)
        #expect(RuleRecord.decode(RuleRecord.encode(old)) == old)
        let print = FileFingerprint(size: 9, modified: -1, changed: .max)
        let new = [AccessRule(.executable(path: "/x", device: 1, inode: 2, fingerprint: print))] + old
        #expect(RuleRecord.decode(RuleRecord.encode(new)) == new, "fingerprinted and not, in one record")
        var presence = RuleRecord.encode(new)
        presence[3 + 2 + 2 + 2 + 16] = 2
        #expect(RuleRecord.decode(presence) == nil, "neither with nor without a fingerprint")
        var flags = RuleRecord.encode([nginxRule])
        flags[4] |= 0x80
        #expect(RuleRecord.decode(flags) == nil, "unknown flag")
        var kind = RuleRecord.encode([nginxRule])
        kind[3] = 9
        #expect(RuleRecord.decode(kind) == nil, "unknown kind")
        #expect(RuleRecord.decode(RuleRecord.encode([AccessRule(.unit("nginx"))])) == nil, "not a unit name")
        #expect(RuleRecord.decode(RuleRecord.encode([AccessRule(.executable(path: "rel", device: 1, inode: 2, fingerprint: nil))])) == nil, "relative path")
    }

    @Test(arguments: StorageEngine.all)
    func theRulesStampChangesWithTheRulesOnly(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let mount = try makeVault(scratch)
        try mount.store(secret("t"), at: path("app/token"))
        let first = try mount.rulesStamp()
        try mount.store(secret("u"), at: path("app/token"))
        #expect(try mount.rulesStamp() == first)
        // Another process (here another connection) changes the rules: the mount sees it.
        try reopen(scratch).allow(headRule, at: path("app"))
        let second = try mount.rulesStamp()
        #expect(second != first)
        #expect(try mount.accessPolicy().hasAnyRules)
        try reopen(scratch).allow(headRule, at: path("app"))
        #expect(try mount.rulesStamp() != second, "every change reseals, even to the same rules")
        mount.lock()
        // Locked, the rules cannot be read, but a change to them can still be seen.
        let locked = try mount.rulesStamp()
        #expect(locked != second)
        try reopen(scratch).disallow(nil, at: path("app"))
        #expect(try mount.rulesStamp() != locked)
        #expect(throws: VaultError.locked) { try mount.accessPolicy() }
    }

    @Test(arguments: StorageEngine.all)
    func disallowingTheLastRuleRemovesTheRuleSet(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        try vault.makeDictionary(at: path("app"), withIntermediates: false)
        try vault.allow(headRule, at: path("app"))
        #expect(try vault.disallow(headRule.principal, at: path("app")).isEmpty)
        #expect(try !vault.accessPolicy().hasAnyRules)
        #expect(try rawRuleRows(scratch).isEmpty)
    }

    @Test func noRuleIsStoredInTheClear() throws {
        let scratch = Scratch()
        let vault = try makeVault(scratch)
        try vault.makeDictionary(at: path("SECRETDICT"), withIntermediates: false)
        try vault.allow(AccessRule(.unit("canary-unit-name.service")), at: path("SECRETDICT"))
        let bytes = vaultFileBytes(scratch.vaultPath)
        #expect(!contains(bytes, Array("SECRETDICT".utf8)))
        #expect(!contains(bytes, Array("canary-unit-name".utf8)))
    }

    @Test(arguments: StorageEngine.all)
    func aRenameCarriesItsRules(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        try vault.store(secret("t"), at: path("app/token"))
        try vault.makeDictionary(at: path("elsewhere"), withIntermediates: false)
        try vault.allow(headRule, at: path("app"))
        try vault.allow(nginxRule, at: path("app/token"))
        try vault.move(path("app"), to: path("elsewhere/renamed"))
        #expect(try vault.ruleSets().map(\.path) == [path("elsewhere/renamed"), path("elsewhere/renamed/token")])
        let token = try vault.node(at: path("elsewhere/renamed/token")).id
        try vault.disallow(nginxRule.principal, at: path("elsewhere/renamed/token"))
        #expect(try vault.governingRuleSet(of: token, in: vault.accessPolicy())?.rules == [headRule])
        #expect(try reopen(scratch).verify().isEmpty)
    }

    @Test(arguments: StorageEngine.all)
    func removingARuledNodeOrItsDictionaryRemovesItsRulesInTheSameTransaction(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        try vault.store(secret("t"), at: path("app/deep/token"))
        try vault.store(secret("k"), at: path("keep/token"))
        try vault.store(secret("x"), at: path("single"))
        try vault.allow(headRule, at: path("app"))
        try vault.allow(nginxRule, at: path("app/deep/token"))
        try vault.allow(headRule, at: path("keep/token"))
        try vault.allow(headRule, at: path("single"))
        let keep = try vault.node(at: path("keep/token")).id.rawValue
        #expect(try rawRuleRows(scratch).count == 4)

        try vault.remove(path("single"), recursive: false)
        #expect(try rawRuleRows(scratch).count == 3)
        try vault.remove(path("app"), recursive: true)
        #expect(try rawRuleRows(scratch).map(\.0) == [keep])
        let reopened = try reopen(scratch)
        #expect(try reopened.ruleSets().map(\.path) == [path("keep/token")])
        #expect(try reopened.verify().isEmpty)

        // An item replaced by a rename goes with its rules.
        try reopened.store(secret("n"), at: path("new"))
        try reopened.move(path("new"), to: path("keep/token"))
        #expect(try rawRuleRows(scratch).isEmpty)
        #expect(try !reopen(scratch).accessPolicy().hasAnyRules)
        #expect(try reopen(scratch).verify().isEmpty)
    }

    @Test(arguments: StorageEngine.all)
    func aNodeRowMovedOutFromUnderItsRulesIsRefusedWhenGoverning(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        try vault.store(secret("t"), at: path("app/token"))
        try vault.makeDictionary(at: path("open"), withIntermediates: false)
        try vault.allow(headRule, at: path("app"))
        let token = try vault.node(at: path("app/token")).id.rawValue, open = try vault.node(at: path("open")).id.rawValue
        try scratch.rawRows().update("nodes", set: "parent = \(open)", where: "id = \(token)")
        let reopened = try reopen(scratch)
        let policy = try reopened.accessPolicy()
        do throws(VaultError) {
            let set = try reopened.governingRuleSet(of: NodeID(token), in: policy)
            Issue.record("a moved row was governed by \(String(describing: set))")
        } catch .integrityFailure {
        } catch {
            Issue.record("failed with \(error), not an integrity failure")
        }
    }
}

/// A rule row tampered with in the file, in every way an attacker with the file could: the
/// policy refuses to load (never a policy with a rule missing), verify reports it, and no
/// change launders it.
@Suite struct RuleTamperTests {
    /// A vault with rules on `app` and `app/token`, and `other` unruled.
    func makeRuled(_ scratch: Scratch) throws -> (app: Int64, token: Int64, other: Int64) {
        let vault = try makeVault(scratch)
        try vault.store(secret("t"), at: path("app/token"))
        try vault.store(secret("o"), at: path("other/item"))
        try vault.allow(headRule, at: path("app"))
        try vault.allow(nginxRule, at: path("app/token"))
        return (try vault.node(at: path("app")).id.rawValue, try vault.node(at: path("app/token")).id.rawValue,
                try vault.node(at: path("other")).id.rawValue)
    }

    func expectRefused(_ scratch: Scratch, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let vault: Vault
        do {
            vault = try reopen(scratch)
        } catch VaultError.integrityFailure {
            // The rules' MAC is bound into the vault's state (format 8): refused at the open.
            return
        }
        do throws(VaultError) {
            _ = try vault.accessPolicy()
            Issue.record("\(what): the policy loaded", sourceLocation: sourceLocation)
        } catch .integrityFailure {
        } catch {
            Issue.record("\(what): failed with \(error), not an integrity failure", sourceLocation: sourceLocation)
        }
        #expect(try !vault.verify().isEmpty, "\(what): verify saw nothing", sourceLocation: sourceLocation)
        // A change checks the rules first: it does not seal a fresh MAC over the tampering.
        #expect(throws: VaultError.self, "\(what): allow went through", sourceLocation: sourceLocation) {
            try vault.allow(AccessRule(.unit("x.service")), at: path("other"))
        }
        #expect(throws: VaultError.self, "\(what): ruleSets listed", sourceLocation: sourceLocation) { try vault.ruleSets() }
    }

    @Test(arguments: StorageEngine.all)
    func aFlippedBitInARuleRecord(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let ids = try makeRuled(scratch)
        let original = try rawRuleRows(scratch).first { $0.0 == ids.app }!.1
        for offset in [0, 24, original.count / 2, original.count - 1] {
            var damaged = original
            damaged[offset] ^= 0x04
            try scratch.rawRows().setBlob("rules", "sealed", where: "node = \(ids.app)", damaged)
            try expectRefused(scratch, "flip at \(offset)")
        }
        try scratch.rawRows().setBlob("rules", "sealed", where: "node = \(ids.app)", original)
        #expect(try reopen(scratch).accessPolicy().ruleSets.count == 2)
        #expect(try reopen(scratch).verify().isEmpty)
    }

    @Test(arguments: StorageEngine.all)
    func aRuleRowMovedToAnotherNode(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let ids = try makeRuled(scratch)
        try scratch.rawRows().update("rules", set: "node = \(ids.other)", where: "node = \(ids.app)")
        try expectRefused(scratch, "moved to another node")
        try scratch.rawRows().update("rules", set: "node = 9999", where: "node = \(ids.other)")
        try expectRefused(scratch, "moved to a node that does not exist")
    }

    @Test(arguments: StorageEngine.all)
    func aDeletedRuleRow(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let ids = try makeRuled(scratch)
        try scratch.rawRows().delete("rules", where: "node = \(ids.token)")
        try expectRefused(scratch, "deleted row")
        // Deleting them all is no better.
        try scratch.rawRows().delete("rules", where: "true")
        try expectRefused(scratch, "every row deleted")
    }

    @Test(arguments: StorageEngine.all)
    func anAddedCopyOfARuleRow(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let ids = try makeRuled(scratch)
        try scratch.rawRows().insertCopies("rules", setting: "node", to: ids.other, keeping: ["sealed"], where: "node = \(ids.app)")
        try expectRefused(scratch, "added copy")
    }

    @Test(arguments: StorageEngine.all)
    func aRuleRowReplayedFromAnEarlierState(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let ids = try makeRuled(scratch)
        let earlier = try rawRuleRows(scratch).first { $0.0 == ids.app }!.1
        // The rule is made read-only, then the earlier (writable) record is put back.
        try reopen(scratch).allow(AccessRule(headRule.principal, readOnly: true), at: path("app"))
        try scratch.rawRows().setBlob("rules", "sealed", where: "node = \(ids.app)", earlier)
        try expectRefused(scratch, "replayed row")
    }

    @Test(arguments: StorageEngine.all)
    func aMissingMAC(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        _ = try makeRuled(scratch)
        try scratch.rawRows().updateVaultRow(set: "rules_mac = NULL")
        try expectRefused(scratch, "NULL MAC")
        // Even with no rules at all: an empty policy needs its MAC too.
        let empty = try Scratch(engine)
        _ = try makeVault(empty)
        try empty.rawRows().updateVaultRow(set: "rules_mac = NULL")
        try expectRefused(empty, "NULL MAC of no rules")
    }

    @Test func removingARuledNodeOfATamperedVaultFailsAndRemovesNothing() throws {
        let scratch = Scratch()
        let ids = try makeRuled(scratch)
        try scratch.rawRows().delete("rules", where: "node = \(ids.app)")
        let vault = try reopen(scratch)
        #expect(throws: VaultError.self) { try vault.remove(path("app/token"), recursive: false) }
        #expect(try vault.read(path("app/token")).testBytes == Array("t".utf8))
        #expect(try rawRuleRows(scratch).map(\.0) == [ids.token])
    }
}

/// The upgrade to format 4 of vaults made before it: no rules, and a MAC that says so.
@Suite struct RuleFormatUpgradeTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures").path

    func fixturePassphrase() throws -> SecureBuffer {
        var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: RuleFormatUpgradeTests.fixtures + "/v1.passphrase")))
        if bytes.last == 0x0A { bytes.removeLast() }
        return secret(bytes)
    }

    @Test(arguments: [1, 2, 3])
    func anOlderVaultIsUpgradedWithAnEmptyPolicyAndTakesRules(version: Int) throws {
        let scratch = Scratch()
        try FileManager.default.copyItem(atPath: RuleFormatUpgradeTests.fixtures + "/v\(version).vault", toPath: scratch.vaultPath)
        let vault = try Vault.open(at: scratch.vaultPath, passphrase: try fixturePassphrase())
        #expect(try scratch.rawRows().vaultBlob("rules_mac")?.count == 32)
        #expect(try !vault.accessPolicy().hasAnyRules)
        #expect(try vault.verify().isEmpty)
        try vault.allow(headRule, at: path("app/token"))
        let reopened = try Vault.open(at: scratch.vaultPath, passphrase: try fixturePassphrase())
        #expect(try reopened.ruleSets().map(\.path) == [path("app/token")])
        #expect(try reopened.verify().isEmpty)
        if version == 3 {
            #expect(try reopened.read(path("app/token")).testBytes == Array("ghp_v3FixtureToken".utf8))
            #expect(try reopened.attribute(try AttributeName("service"), at: path("mail/work/password")).testBytes == Array("mail".utf8))
        }
    }
}
