import Foundation
import Glibc
@testable import StoragePostgres
@testable import StorageSQLite
import Testing
@testable import VaultCore

/// The offline replica's copy (`ReplicaCopy`) against a real PostgreSQL server: the replica
/// opens as the same vault, with the same passphrase, and authenticates the same records (their
/// associated data does not depend on the engine); a copy moves only what changed; the times
/// of a first copy, of a copy after one change and of a look that finds nothing are printed.
@Suite(.serialized, .tags(.slow)) struct ReplicaCopyTests {
    static func time<T>(_ body: () throws -> T) rethrows -> (T, Double) {
        let start = Date()
        let value = try body()
        return (value, Date().timeIntervalSince(start))
    }

    @Test func aReplicaIsTheSameVaultAndACopyTakesOnlyWhatChanged() throws {
        guard StorageEngine.all.contains(.postgreSQL) else { return }
        let scratch = try Scratch(.postgreSQL)
        let vault = try makeVault(scratch)
        let count = 1_000
        let entries = (0..<count).map { index in
            PortableEntry(item: path("team/app\(index / 100)/item\(index)"), content: secret("value \(index)"),
                          attributes: [Attribute(name: try! AttributeName("user.service"), value: secret("svc\(index % 10)"))])
        }
        try vault.importEntries(entries, replacing: false)
        try vault.store(secret(String(repeating: "large ", count: 2_000)), at: path("team/large"))

        let replicaPath = scratch.directory + "/replica.vault"
        let server = try PostgresStorage.open(at: scratch.vaultPath)
        let (replica, first) = try ReplicaCopyTests.time {
            try SQLiteStorage.create(at: replicaPath) { (replica) throws(VaultError) in
                try ReplicaCopy.fill(replica, from: server, shown: "test")
            }
        }
        // Opened as a vault of its own with the same passphrase: every record authenticates.
        do {
            let copy = try Vault.open(at: replicaPath, passphrase: secret(passphrase))
            #expect(try copy.read(path("team/app3/item345")).testBytes == Array("value 345".utf8))
            #expect(try copy.read(path("team/large")).testBytes == Array(String(repeating: "large ", count: 2_000).utf8))
            #expect(try copy.itemCount() == count + 1)
        }

        let (unchanged, look) = try ReplicaCopyTests.time {
            try ReplicaCopy.refresh(from: server, into: replica, cipher: nil, accepting: false, shown: "test")
        }
        #expect(!unchanged)
        try vault.store(secret("changed"), at: path("team/app7/item777"))
        try vault.remove(path("team/app9/item999"), recursive: false)
        let (changed, one) = try ReplicaCopyTests.time {
            try ReplicaCopy.refresh(from: server, into: replica, cipher: nil, accepting: false, shown: "test")
        }
        #expect(changed)
        let copy = try Vault.open(at: replicaPath, passphrase: secret(passphrase))
        #expect(try copy.read(path("team/app7/item777")).testBytes == Array("changed".utf8))
        #expect(throws: VaultError.notFound("team/app9/item999")) { _ = try copy.read(path("team/app9/item999")) }
        #expect(try copy.itemCount() == count)
        print("ReplicaCopyTests: \(count + 1) items (one of 12 000 bytes in blocks), 1 attribute each: first copy "
              + "\(String(format: "%.3f", first)) s, a look finding nothing \(String(format: "%.4f", look)) s, "
              + "a copy after one store and one removal \(String(format: "%.3f", one)) s")
    }
    /// Two sessions of one machine share its replica (a mount and a command, two mounts). A
    /// commit that notifies nobody (an access log batch) raises the generation unheard by the
    /// other session, whose connection still remembers the vault's row from before; once the
    /// first has copied that generation, the other's copy finds the replica at it and is no
    /// verdict that the server was rolled back (which would leave its mount refusing every
    /// change). A server truly older than the replica is still refused.
    @Test func aCopyAfterAnotherSessionsUnheardCommitIsNoRollback() throws {
        guard StorageEngine.all.contains(.postgreSQL) else { return }
        let scratch = try Scratch(.postgreSQL)
        let mount = try makeVault(scratch)
        try mount.store(secret("first"), at: path("app/token"))
        let command = try reopen(scratch)
        func storage(_ vault: Vault) throws -> (PostgresStorage, RecordCipher?) {
            try vault.withStorage { (storage) throws(VaultError) in
                (storage as! PostgresStorage, storage.generationCipher as? RecordCipher)
            }
        }
        let (mountServer, mountCipher) = try storage(mount)
        let (commandServer, commandCipher) = try storage(command)
        let before = try #require(try commandServer.read { () throws(VaultError) in try commandServer.vaultState() }).generation

        try command.appendAccessLog([Vault.ownChange(.read, at: path("app/token"))])
        let replica = try SQLiteStorage.create(at: scratch.directory + "/replica.vault") { (replica) throws(VaultError) in
            try ReplicaCopy.fill(replica, from: commandServer, shown: "test")
        }
        #expect(try replica.vaultState()?.generation == before + 1)

        // What the mount's connection remembers is the generation before the log batch.
        #expect(try mountServer.read { () throws(VaultError) in try mountServer.vaultState() }?.generation == before)
        #expect(try ReplicaCopy.refresh(from: mountServer, into: replica, cipher: mountCipher, accepting: false, shown: "test") == false)

        // A replica newer than the server (a dump restored under it) is still a rollback.
        try mount.store(secret("second"), at: path("app/token"))
        _ = try ReplicaCopy.refresh(from: mountServer, into: replica, cipher: mountCipher, accepting: false, shown: "test")
        let newest = try #require(try replica.vaultState()).generation
        try scratch.engine.rawRows(scratch.vaultPath).updateVaultRow(set: "generation = \(newest - 2)")
        #expect(throws: VaultError.rolledBack(path: "test", found: newest - 2, newest: newest)) {
            try ReplicaCopy.refresh(from: commandServer, into: replica, cipher: commandCipher, accepting: false, shown: "test")
        }
    }
}
