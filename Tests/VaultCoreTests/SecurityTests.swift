import CSQLite
import Foundation
import Testing
import VaultCore

@Suite struct PassphraseTests {
    @Test func wrongPassphraseIsRefused() throws {
        let scratch = Scratch()
        _ = try makeVault(scratch)
        #expect(throws: VaultError.wrongPassphrase) { try reopen(scratch, with: "correct horse battery stapler") }
        #expect(throws: VaultError.invalidArgument("the passphrase is empty")) {
            try Vault.create(at: scratch.directory + "/other.vault", passphrase: secret(""), kdf: KDFPreset.interactive.parameters)
        }
    }

    @Test func changedPassphraseOpensEverythingAndTheOldOneFails() throws {
        let scratch = Scratch()
        let vault = try makeVault(scratch)
        for i in 0..<20 { try vault.store(secret("value \(i)"), at: path("d\(i % 3)/item\(i)")) }
        try vault.changePassphrase(to: secret("a brand new passphrase"))
        #expect(throws: VaultError.wrongPassphrase) { try reopen(scratch) }
        let reopened = try reopen(scratch, with: "a brand new passphrase")
        for i in 0..<20 {
            #expect(try reopened.read(path("d\(i % 3)/item\(i)")).testBytes == Array("value \(i)".utf8))
        }
        #expect(try reopened.verify().isEmpty)
    }

    @Test func createRefusesToOverwriteAndMakesPrivateFiles() throws {
        let scratch = Scratch()
        let nested = scratch.directory + "/new/dir/test.vault"
        _ = try Vault.create(at: nested, passphrase: secret(passphrase), kdf: KDFPreset.interactive.parameters)
        #expect(throws: VaultError.vaultExists(nested)) {
            try Vault.create(at: nested, passphrase: secret(passphrase), kdf: KDFPreset.interactive.parameters)
        }
        var info = stat()
        #expect(stat(nested, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(stat(scratch.directory + "/new/dir", &info) == 0 && info.st_mode & 0o777 == 0o700)
        #expect(stat(scratch.directory + "/new", &info) == 0 && info.st_mode & 0o777 == 0o700)
    }
}

@Suite struct AtRestTests {
    @Test func vaultFilesHoldNeitherContentsNorNames() throws {
        let scratch = Scratch()
        let vault = try makeVault(scratch)
        let contentCanary = "CONTENT-CANARY-" + UUID().uuidString
        let nameCanary = "NAMECANARY" + UUID().uuidString.prefix(8)
        try vault.store(secret(contentCanary), at: VaultPath("\(nameCanary)/token"))
        try vault.store(secret(contentCanary + contentCanary), at: VaultPath("apps/\(nameCanary)-item"))
        try vault.move(VaultPath("apps/\(nameCanary)-item"), to: VaultPath("apps/\(nameCanary)-moved"))
        for file in [vaultFileBytes(scratch.vaultPath)] {
            #expect(!contains(file, Array(contentCanary.utf8)))
            #expect(!contains(file, Array(nameCanary.utf8)))
            #expect(!contains(file, Array("token".utf8)))
        }
        // Still true once the WAL is checkpointed into the main file.
        withRawDatabase(scratch.vaultPath) { rawExec($0, "PRAGMA wal_checkpoint(TRUNCATE)") }
        let file = vaultFileBytes(scratch.vaultPath)
        #expect(!contains(file, Array(contentCanary.utf8)))
        #expect(!contains(file, Array(nameCanary.utf8)))
    }

    @Test func ciphertextSizesRevealOnlyBuckets() throws {
        let scratch = Scratch()
        let vault = try makeVault(scratch)
        try vault.store(secret("a"), at: path("short"))
        try vault.store(secret(String(repeating: "b", count: 60)), at: path("a-longer-name-but-same-bucket"))
        withRawDatabase(scratch.vaultPath) { db in
            let contents = rawBlobs(db, "SELECT id, content FROM nodes WHERE content IS NOT NULL").map(\.1.count)
            let names = rawBlobs(db, "SELECT id, name FROM nodes WHERE id != 1").map(\.1.count)
            #expect(Set(contents).count == 1)
            #expect(Set(names).count == 1)
        }
    }
}

@Suite struct SecureMemoryTests {
    /// Small buffers reuse wiped, locked slots: what one owner wrote must never show through
    /// the next, and every size up to a slot and past it keeps its full capacity usable.
    @Test func reusedMemoryIsWipedAndEverySizeHoldsItsCapacity() throws {
        for size in [1, 15, 64, 100, 4095, 4096, 4097, 20_000] {
            for _ in 0..<20 {
                var used = try SecureBuffer(capacity: size <= 4096 ? 4096 : size)  // a whole slot
                used.withUnsafeMutableStorage { storage in
                    memset(storage.baseAddress!, 0xA5, storage.count)
                    return storage.count
                }
                _ = consume used
                var fresh = try SecureBuffer(capacity: size)
                #expect(fresh.capacity == size)
                var nonZero = 0
                fresh.withUnsafeMutableStorage { storage in
                    nonZero = storage.reduce(0) { $0 + ($1 == 0 ? 0 : 1) }
                    return 0
                }
                #expect(nonZero == 0, "a \(size)-byte buffer showed a previous owner's bytes")
            }
        }
    }
}
