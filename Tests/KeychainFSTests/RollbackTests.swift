import Foundation
@testable import KeychainFS
import Testing
import VaultCore

/// Rollback (format 8): the rules, the member slots and the header are bound to a generation
/// that every write raises, and this machine refuses a vault older than the newest generation
/// it saw of it. Each attack is made as a user with the file (or the database) would make it:
/// sqlite3, psql, pg_dump; each check goes through the real command line or mount.
@Suite(.serialized, .tags(.mount, .postgres, .slow)) struct RollbackTests {
    private static let sqlite3 = "/usr/bin/sqlite3"

    /// A consistent copy of an SQLite vault (its WAL included), as a backup tool would take it.
    private func backup(_ vault: String, to copy: String) throws {
        let result = try run(Self.sqlite3, [vault, ".backup '\(copy)'"])
        #expect(result.status == 0, "sqlite3 .backup: \(result.stderr)")
    }

    /// The older file put back in place of the vault, as a restore from a backup does.
    private func restore(_ copy: String, over vault: String) throws {
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: vault + suffix) }
        try FileManager.default.removeItem(atPath: vault)
        try FileManager.default.copyItem(atPath: copy, toPath: vault)
    }

    /// -1 when there is none (a vault of format 7): the checks after it still run.
    private func generation(ofFile vault: String) throws -> Int {
        let result = try run(Self.sqlite3, [vault, "SELECT generation FROM vault"])
        return Int(result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    /// (a) The rules and their MAC copied from an older copy of the file into the newer one
    /// (which has a rule more, and items written since): refused as tampering, by the command
    /// line and by the mount. Copied with the vault row's generation and state as well, they
    /// are an older generation: refused as a rollback.
    @Test func rulesCopiedFromAnOlderCopyAreRefused() throws {
        let f = try CLIFixture()
        #expect(try f.cli(["set", "app/token", "t0k3n"]).exitStatus == .success)
        let old = f.directory + "/old.vault"
        try backup(f.vault, to: old)
        #expect(try f.cli(["allow", "--unit", "backup.service", "app"]).exitStatus == .success)
        #expect(try f.cli(["set", "app/newer", "n"]).exitStatus == .success)

        let copyRules = """
            ATTACH '\(old)' AS old;
            DELETE FROM rules; INSERT INTO rules SELECT * FROM old.rules;
            UPDATE vault SET rules_mac = (SELECT rules_mac FROM old.vault);
            """
        let copied = try run(Self.sqlite3, [f.vault, copyRules])
        #expect(copied.status == 0, "sqlite3: \(copied.stderr)")
        let rules = try f.cli(["rules"])
        #expect(rules.exitStatus == .integrityFailure, "rules: \(rules.status) \(rules.stdoutText) \(rules.stderr)")
        #expect(rules.stderr.contains("copied from another copy of the vault"), "\(rules.stderr)")
        let read = try f.cli(["get", "app/newer"])
        #expect(read.exitStatus == .integrityFailure, "get: \(read.status) \(read.stderr)")
        let mountpoint = f.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let mounted = try run(keychainfsBinary, ["mount", "--vault", f.vault, "--passphrase-file", f.passphraseFile, mountpoint])
        if mounted.exitStatus == .success { _ = try? run(keychainfsBinary, ["unmount", mountpoint]) }
        #expect(mounted.exitStatus == .integrityFailure, "mount: \(mounted.status) \(mounted.stderr)")

        // The whole row too: consistent, but older than this machine saw.
        let copyRow = """
            ATTACH '\(old)' AS old;
            UPDATE vault SET generation = (SELECT generation FROM old.vault), members_mac = (SELECT members_mac FROM old.vault),
                             state_mac = (SELECT state_mac FROM old.vault);
            """
        let newest = try generation(ofFile: f.vault)
        #expect(try run(Self.sqlite3, [f.vault, copyRow]).status == 0)
        let older = try generation(ofFile: f.vault)
        let again = try f.cli(["rules"])
        #expect(again.exitStatus == .rolledBack, "rules: \(again.status) \(again.stderr)")
        #expect(again.stderr.contains("generation \(older)") && again.stderr.contains("generation \(newest)"), "\(again.stderr)")
    }

    /// (b) An older vault file put back: the command line and the mount refuse it with the exit
    /// status of its own, naming both generations; `--accept-rollback` opens it, and from then
    /// on its generation is the newest seen.
    @Test func anOlderVaultFileIsRefusedUntilAccepted() throws {
        let f = try CLIFixture()
        #expect(try f.cli(["set", "app/token", "old"]).exitStatus == .success)
        let old = f.directory + "/old.vault"
        try backup(f.vault, to: old)
        let older = try generation(ofFile: old)
        #expect(try f.cli(["set", "app/token", "new"]).exitStatus == .success)
        #expect(try f.cli(["set", "app/other", "x"]).exitStatus == .success)
        let newest = try generation(ofFile: f.vault)
        #expect(newest > older)
        try restore(old, over: f.vault)

        let read = try f.cli(["get", "app/token"])
        #expect(read.exitStatus == .rolledBack, "get: \(read.status) \(read.stdoutText) \(read.stderr)")
        #expect(read.stderr.contains("generation \(older)") && read.stderr.contains("generation \(newest)"), "\(read.stderr)")
        #expect(read.stdout.isEmpty)

        let mountpoint = f.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let mount = { (extra: [String]) throws -> RunResult in
            try run(keychainfsBinary, ["mount", "--vault", f.vault, "--passphrase-file", f.passphraseFile] + extra + [mountpoint])
        }
        let refused = try mount([])
        if refused.exitStatus == .success { _ = try? run(keychainfsBinary, ["unmount", mountpoint]) }
        #expect(refused.exitStatus == .rolledBack, "mount: \(refused.status) \(refused.stderr)")
        #expect(refused.stderr.contains("generation \(older)") && refused.stderr.contains("generation \(newest)"), "\(refused.stderr)")

        let accepted = try mount(["--accept-rollback"])
        #expect(accepted.exitStatus == .success, "mount --accept-rollback: \(accepted.status) \(accepted.stderr)")
        if accepted.exitStatus == .success {
            #expect(try String(contentsOfFile: mountpoint + "/app/token", encoding: .utf8) == "old")
            #expect(try run(keychainfsBinary, ["unmount", mountpoint]).exitStatus == .success)
        }
        // Accepted once, it is what this machine knows now.
        let after = try f.cli(["get", "app/token"])
        #expect(after.exitStatus == .success && after.stdoutText == "old", "get: \(after.status) \(after.stderr)")

        // The command line's option, for a file put back again.
        try restore(old, over: f.vault)
        let cliRefused = try f.cli(["get", "app/token"])
        #expect(cliRefused.exitStatus == .rolledBack, "get: \(cliRefused.status) \(cliRefused.stderr)")
        let cliAccepted = try f.cli(["get", "--accept-rollback", "app/token"])
        #expect(cliAccepted.exitStatus == .success && cliAccepted.stdoutText == "old", "get: \(cliAccepted.status) \(cliAccepted.stderr)")
    }

    /// Another program of the user lowering this machine's record of the vault: refused as
    /// tampering, never believed (its MAC needs the vault's key).
    @Test func aLoweredRecordOfTheNewestGenerationIsRefused() throws {
        let f = try CLIFixture()
        #expect(try f.cli(["set", "app/token", "old"]).exitStatus == .success)
        let old = f.directory + "/old.vault"
        try backup(f.vault, to: old)
        #expect(try f.cli(["set", "app/token", "new"]).exitStatus == .success)
        try restore(old, over: f.vault)
        let state = SeenGenerations.path
        let lowered = try run(Self.sqlite3, [state, "UPDATE seen SET generation = 1 WHERE location = CAST('\(realPath(f.vault))' AS BLOB)"])
        #expect(lowered.status == 0, "\(lowered.stderr)")
        let read = try f.cli(["get", "app/token"])
        #expect(read.exitStatus == .integrityFailure, "get: \(read.status) \(read.stdoutText) \(read.stderr)")
        #expect(read.stderr.contains("changed outside keychainfs"), "\(read.stderr)")
    }

    /// (c) A removed member's slot put back into the team vault's table (with its own MAC, which
    /// still holds): the members' MAC the state binds refuses the vault to the members left,
    /// where before it opened with the slot in it.
    @Test func aRemovedMembersSlotPutBackIsRefused() throws {
        let server = try PostgresServer()
        let uri = try server.createDatabase("team")
        let owner = try CLIFixture(vault: uri)
        var keys: [String: String] = [:]
        for name in ["ann", "bob"] {
            let key = owner.directory + "/\(name).key"
            let made = try run(keychainfsBinary, ["member", "init", "--member-key", key, "--kdf", "interactive",
                                                  "--passphrase-file", owner.passphraseFile])
            let publicKey = try #require(made.stdoutText.split(separator: "\n").last.map(String.init))
            let added = try run(keychainfsBinary, ["member", "add", "--vault", uri, "--passphrase-file", owner.passphraseFile,
                                                   publicKey, "--name", name])
            #expect(added.exitStatus == .success, "member add: \(added.status) \(added.stderr)")
            keys[name] = key
        }
        #expect(try owner.cli(["set", "app/token", "t"]).exitStatus == .success)
        let bobsRow = try server.sql("team", "SELECT encode(public_key, 'hex') || ' ' || encode(sealed_master_key, 'hex') "
                                        + "FROM member_slots WHERE name = convert_to('bob', 'UTF8')")
        let parts = bobsRow.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ")
        try #require(parts.count == 2)
        let removed = try run(keychainfsBinary, ["member", "remove", "--vault", uri, "--passphrase-file", owner.passphraseFile, "bob"])
        #expect(removed.exitStatus == .success, "member remove: \(removed.status) \(removed.stderr)")
        let asAnn = { (arguments: [String]) throws -> RunResult in
            var args = arguments
            args.insert(contentsOf: ["--vault", uri, "--member-key", keys["ann"]!, "--passphrase-file", owner.passphraseFile], at: 1)
            return try run(keychainfsBinary, args)
        }
        #expect(try asAnn(["get", "app/token"]).exitStatus == .success)

        try server.sql("team", "INSERT INTO member_slots (vault, name, public_key, sealed_master_key) "
                           + "SELECT name, convert_to('bob', 'UTF8'), decode('\(parts[0])', 'hex'), decode('\(parts[1])', 'hex') FROM vaults")
        let read = try asAnn(["get", "app/token"])
        #expect(read.exitStatus == .integrityFailure, "get: \(read.status) \(read.stdoutText) \(read.stderr)")
        #expect(read.stderr.contains("member slots"), "\(read.stderr)")
        let bobArgs = ["get", "--vault", uri, "--member-key", keys["bob"]!, "--passphrase-file", owner.passphraseFile, "app/token"]
        #expect(try run(keychainfsBinary, bobArgs).exitStatus != .success)
    }

    /// (d) An older pg_dump of the database restored: refused with both generations named,
    /// opened with `--accept-rollback`.
    @Test func anOlderPostgresDumpIsRefusedUntilAccepted() throws {
        let server = try PostgresServer()
        let uri = try server.createDatabase("vaults")
        let f = try CLIFixture(vault: uri)
        #expect(try f.cli(["set", "app/token", "old"]).exitStatus == .success)
        let dump = try server.dump("vaults")
        let generationNow = { () -> Int in
            Int(((try? server.sql("vaults", "SELECT generation FROM vaults")) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }
        let older = generationNow()
        #expect(try f.cli(["set", "app/token", "new"]).exitStatus == .success)
        #expect(try f.cli(["set", "app/other", "x"]).exitStatus == .success)
        let newest = generationNow()
        #expect(newest > older)

        try server.sql("postgres", "DROP DATABASE vaults")
        _ = try server.createDatabase("vaults")
        let restored = try run(PostgresServer.binaries + "/psql", ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", server.socketDirectory,
                                                                   "-p", String(server.port), "-U", "postgres", "-d", "vaults"],
                               stdin: Data(dump.utf8))
        #expect(restored.status == 0, "psql restore: \(restored.stderr)")
        #expect(generationNow() == older)

        let read = try f.cli(["get", "app/token"])
        #expect(read.exitStatus == .rolledBack, "get: \(read.status) \(read.stdoutText) \(read.stderr)")
        #expect(read.stderr.contains("generation \(older)") && read.stderr.contains("generation \(newest)"), "\(read.stderr)")
        let accepted = try f.cli(["get", "--accept-rollback", "app/token"])
        #expect(accepted.exitStatus == .success && accepted.stdoutText == "old", "get: \(accepted.status) \(accepted.stderr)")
    }

    @Test func mountOptionAcceptRollbackIsTheFlag() throws {
        let translated = try MountHelperArguments.translate(["/v.vault", "/mnt", "-o", "accept_rollback"], subcommands: [])
        #expect(translated?.contains("--accept-rollback") == true)
    }
}

private func realPath(_ path: String) -> String {
    guard let resolved = realpath(path, nil) else { return path }
    defer { free(resolved) }
    return String(cString: resolved)
}
