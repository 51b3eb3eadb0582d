import CSQLite
import Testing
@testable import VaultCore

/// SQLite's user_version is not sealed; the header's MAC binds the format from version 4 on,
/// so a vault set back to 3 (its rules and log dropped, to be upgraded again without them) or
/// to 4 (to be read by code that takes its item properties for damage) is refused rather than
/// read as an older vault.
@Suite struct FormatDowngradeTests {
    @Test func aVaultSetBackToVersion3WithItsRulesDroppedIsRefused() throws {
        let scratch = Scratch()
        let vault = try makeVault(scratch)
        _ = try vault.store(secret("s3cret"), at: path("app/token"))
        try vault.allow(AccessRule(.unit(named: "nginx.service")), at: path("app"))
        withRawDatabase(scratch.vaultPath) { db in
            rawExec(db, "DROP TABLE rules; DROP TABLE access_log; ALTER TABLE vault DROP COLUMN rules_mac; PRAGMA user_version = 3;")
        }
        #expect(throws: VaultError.integrityFailure("vault header (the format version was set back to 3)")) {
            try reopen(scratch)
        }
    }

    @Test func anUpgradedVaultSealsItsFormatAndANewOneDoesFromTheStart() throws {
        let scratch = Scratch()
        _ = try makeVault(scratch)
        withRawDatabase(scratch.vaultPath) { db in rawExec(db, "PRAGMA user_version = 3;") }
        #expect(throws: VaultError.integrityFailure("vault header (the format version was set back to 3)")) {
            try reopen(scratch)
        }
    }

    @Test func aVaultWithPropertiesSetBackFrom5To4IsRefused() throws {
        let scratch = Scratch()
        let vault = try makeVault(scratch)
        let item = try vault.store(secret("s3cret"), at: path("app/token"))
        try vault.setProperty(.label, to: secret("GitHub token"), of: item.id)
        withRawDatabase(scratch.vaultPath) { db in rawExec(db, "PRAGMA user_version = 4;") }
        #expect(throws: VaultError.integrityFailure("vault header (the format version was set back to 4)")) {
            try reopen(scratch)
        }
        // Put back, it opens as it was.
        withRawDatabase(scratch.vaultPath) { db in rawExec(db, "PRAGMA user_version = \(VaultFormat.version);") }
        let reopened = try reopen(scratch)
        #expect(try reopened.property(.label, at: path("app/token"))?.testBytes == Array("GitHub token".utf8))
        #expect(try reopened.verify().isEmpty)
    }
}
