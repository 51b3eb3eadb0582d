import CSQLite
import Foundation
import Testing
@testable import VaultCore

/// The access log in the vault: sealed batches, bound to their place, pruned, unreadable to a
/// holder of the file.
struct AccessLogTests {
    private func entry(_ path: String?, at seconds: Int64 = Timestamp.now().seconds, access: LoggedAccess = .read,
                       decision: LoggedDecision = .allowed, pid: Int32 = 4242) -> AccessLogEntry {
        AccessLogEntry(time: Timestamp(seconds: seconds, nanoseconds: 123_456_789), pid: pid, executable: "/usr/bin/cat",
                       unit: "test.scope", path: path.map { try! VaultPath($0) }, access: access, decision: decision)
    }

    private func sequences(_ scratch: Scratch) throws -> [Int64] {
        try scratch.rawRows().blobs("access_log", "sealed", key: "sequence", where: "true").map(\.0)
    }

    private func setSealed(_ db: OpaquePointer, sequence: Int64, _ bytes: [UInt8]) {
        var statement: OpaquePointer?
        precondition(sqlite3_prepare_v2(db, "UPDATE access_log SET sealed = ? WHERE sequence = ?", -1, &statement, nil) == SQLITE_OK)
        defer { sqlite3_finalize(statement) }
        _ = bytes.withUnsafeBytes { sqlite3_bind_blob(statement, 1, $0.baseAddress, Int32($0.count), csqlite_transient()) }
        sqlite3_bind_int64(statement, 2, sequence)
        precondition(sqlite3_step(statement) == SQLITE_DONE && sqlite3_changes(db) == 1)
    }

    @Test(arguments: StorageEngine.all)
    func entriesRoundTripThroughSealedBatches(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        try vault.store(secret("x"), at: path("app/token"))
        let node = try vault.node(at: path("app/token")).id
        try vault.appendAccessLog([
            entry("app/token"),
            entry(nil, access: .lock, pid: 0),
            entry("app", access: .list, decision: .denied(reason: "no access rule admits process 7")),
            entry("app/ünïcode name", access: .write, decision: .confirmed(false)),
            AccessLogEntry(pid: 9, node: node, access: .read, decision: .confirmed(true)),
            entry("", access: .list),
        ])
        try vault.appendAccessLog([entry("app/token", access: .unlock)])
        let reading = try reopen(scratch).accessLog()
        #expect(reading.problems.isEmpty)
        #expect(reading.lastSequence == 2)
        let entries = reading.entries
        #expect(entries.count == 7)
        #expect(entries[0].path?.description == "app/token" && entries[0].executable == "/usr/bin/cat" && entries[0].unit == "test.scope")
        #expect(entries[0].time == Timestamp(seconds: entries[0].time.seconds, nanoseconds: 123_456_789) && entries[0].pid == 4242)
        #expect(entries[1].path == nil && entries[1].access == .lock && entries[1].pid == 0)
        #expect(entries[2].decision == .denied(reason: "no access rule admits process 7") && entries[2].access == .list)
        #expect(entries[3].path?.description == "app/ünïcode name" && entries[3].decision == .confirmed(false))
        // Recorded by node only (as a locked mount does): the reader resolves it.
        #expect(entries[4].node == node && entries[4].path?.description == "app/token" && entries[4].decision == .confirmed(true))
        #expect(entries[5].path?.isRoot == true)
        #expect(entries[6].access == .unlock)
        #expect(try vault.accessLog(afterSequence: 1).entries.count == 1)
        #expect(try vault.verify().isEmpty)
        #expect(try vault.accessLogSummary() == AccessLogSummary(batches: 2, entries: 7, lastSequence: 2))
    }

    @Test(arguments: StorageEngine.all)
    func aLockedVaultAppendsWithTheSealerAlone(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let sealer = try vault.accessLogSealer()
        vault.lock()
        #expect(throws: VaultError.locked) { try vault.accessLogSealer() }
        #expect(throws: VaultError.locked) { try vault.accessLog() }
        try vault.appendAccessLog([entry(nil, access: .lock, pid: 0)], sealer: sealer)
        #expect(try vault.accessLogSummary().entries == 1)
        #expect(try reopen(scratch).accessLog().entries.map(\.access) == [.lock])
    }

    @Test func anotherVaultsKeyCannotOpenABatch() throws {
        let scratch = Scratch()
        let vault = try makeVault(scratch)
        let other = Scratch()
        let otherVault = try makeVault(other)
        // Sealed to the other vault's key, stored in this one.
        try vault.appendAccessLog([entry("a")], sealer: try otherVault.accessLogSealer())
        let reading = try vault.accessLog()
        #expect(reading.entries.isEmpty)
        #expect(reading.problems.map(\.description) == ["<access log batch 1>: failed authentication"])
        #expect(try vault.verify().map(\.description) == ["<access log batch 1>: failed authentication"])
        // A batch of the other vault copied in whole also fails here.
        try otherVault.appendAccessLog([entry("b")])
        let copied = withRawDatabase(other.vaultPath) { rawBlobs($0, "SELECT sequence, sealed FROM access_log") }[0].1
        withRawDatabase(scratch.vaultPath) { db in setSealed(db, sequence: 1, copied) }
        #expect(try vault.accessLog().problems.count == 1)
    }

    @Test func aBatchMovedToAnotherSequenceIsRefused() throws {
        let scratch = Scratch()
        let vault = try makeVault(scratch)
        try vault.appendAccessLog([entry("a")])
        try vault.appendAccessLog([entry("b")])
        withRawDatabase(scratch.vaultPath) { db in
            let first = rawBlobs(db, "SELECT sequence, sealed FROM access_log WHERE sequence = 1")[0].1
            setSealed(db, sequence: 2, first)
        }
        let reading = try vault.accessLog()
        #expect(reading.entries.map { $0.path?.description } == ["a"])
        // This machine wrote batch 2, so it also knows the one there now is not it (`SeenLogHeads`).
        #expect(reading.problems.map(\.description) == ["<access log batch 2>: was sealed as batch 1 (moved or copied)",
                                                        "<access log batch 2>: is not the batch this machine saw at that place: it was replaced"])
        #expect(try vault.verify().count == 2)
    }

    @Test func tamperedBytesDeletedBatchesAndEditedCountsAreRefused() throws {
        let scratch = Scratch()
        let vault = try makeVault(scratch)
        for name in ["a", "b", "c", "d"] { try vault.appendAccessLog([entry(name)]) }
        withRawDatabase(scratch.vaultPath) { db in
            var sealed = rawBlobs(db, "SELECT sequence, sealed FROM access_log WHERE sequence = 1")[0].1
            sealed[sealed.count / 2] ^= 1
            setSealed(db, sequence: 1, sealed)
            rawExec(db, "DELETE FROM access_log WHERE sequence = 3")
            rawExec(db, "UPDATE access_log SET entries = 5 WHERE sequence = 4")
        }
        let problems = try vault.accessLog().problems.map(\.description)
        #expect(problems == ["<access log batch 1>: failed authentication",
                             "<access log batch 4>: batches between 2 and 4 were deleted",
                             "<access log batch 4>: its times or entry count were edited"])
        #expect(try vault.verify().map(\.description) == problems)
    }

    @Test(arguments: StorageEngine.all)
    func prunedByAgeAndByCountOldestFirst(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let now = Timestamp.now().seconds
        let day: Int64 = 86_400
        try vault.appendAccessLog([entry("old", at: now - 40 * day)])
        try vault.appendAccessLog([entry("older-than-ten", at: now - 11 * day)])
        try vault.appendAccessLog([entry("recent", at: now - day)])
        #expect(try sequences(scratch) == [2, 3])
        try vault.appendAccessLog([entry("now")], bounds: AccessLogBounds(days: 10, entries: 100))
        #expect(try sequences(scratch) == [3, 4])
        // By count: batches of 2, 3 and 4 entries with a bound of 5 keep the newest only, and
        // the newest is kept even over the bound.
        try vault.appendAccessLog([entry("x"), entry("y")])
        try vault.appendAccessLog([entry("x"), entry("y"), entry("z")], bounds: AccessLogBounds(days: 30, entries: 5))
        #expect(try sequences(scratch) == [5, 6])
        try vault.appendAccessLog((0..<6).map { _ in entry("w") }, bounds: AccessLogBounds(days: 30, entries: 5))
        #expect(try sequences(scratch) == [7])
        #expect(try vault.accessLog().problems.isEmpty)
        #expect(try vault.verify().isEmpty)
        // Disabled: nothing is written.
        try vault.appendAccessLog([entry("off")], bounds: AccessLogBounds(days: 0, entries: 100))
        #expect(try sequences(scratch) == [7])
    }

    @Test(arguments: StorageEngine.all)
    func sinceSelectsByTime(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let now = Timestamp.now().seconds
        try vault.appendAccessLog([entry("early", at: now - 7200), entry("late", at: now - 60)])
        try vault.appendAccessLog([entry("latest", at: now)])
        #expect(try vault.accessLog(since: now - 3600).entries.map { $0.path!.description } == ["late", "latest"])
    }

    @Test func noPathOrProcessCanaryInClearInTheFile() throws {
        let scratch = Scratch()
        let vault = try makeVault(scratch)
        let canary = "path-canary-7f3a9c"
        try vault.appendAccessLog([entry("app/\(canary)", decision: .denied(reason: "reason-canary-51d2")),
                                   AccessLogEntry(pid: 1, executable: "/opt/exe-canary-93ab", unit: "unit-canary-11ce.service",
                                                  path: path(canary), access: .write, decision: .allowed)])
        let bytes = vaultFileBytes(scratch.vaultPath)
        for needle in [canary, "reason-canary-51d2", "exe-canary-93ab", "unit-canary-11ce"] {
            #expect(!contains(bytes, Array(needle.utf8)), "\(needle) in clear")
        }
        #expect(try vault.accessLog().entries.count == 2)
    }

    @Test(arguments: StorageEngine.all)
    func aWrongPassphraseReadsNothing(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        try vault.appendAccessLog([entry("a")])
        #expect(throws: VaultError.wrongPassphrase) { try reopen(scratch, with: "wrong").accessLog() }
    }
}
