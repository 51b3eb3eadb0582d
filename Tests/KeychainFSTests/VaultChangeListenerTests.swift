import Foundation
import Testing
import VaultCore

/// Vault.changeListener(): what other sessions commit to a vault in PostgreSQL, by node id.
@Suite(.serialized, .tags(.postgres, .slow)) struct VaultChangeListenerTests {
    private func opened(_ f: CLIFixture) throws -> Vault {
        let phrase = try String(contentsOfFile: f.passphraseFile, encoding: .utf8).dropLast()
        var passphrase = try SecureBuffer(capacity: phrase.utf8.count)
        try Array(phrase.utf8).withUnsafeBytes { try passphrase.append($0) }
        return try Vault.open(at: f.vault, passphrase: passphrase)
    }

    private func secret(_ text: String) throws -> SecureBuffer {
        var buffer = try SecureBuffer(capacity: text.utf8.count)
        try Array(text.utf8).withUnsafeBytes { try buffer.append($0) }
        return buffer
    }

    /// The first notice within `seconds`, nil if none came.
    private func heard(_ listener: VaultChangeListener, within seconds: Double) -> VaultChangeListener.Notice? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let notice = listener.next(timeout: 0.1) { return notice }
        }
        return nil
    }

    @Test func anotherSessionsWriteIsHeardByTheNodesItTouchedAndOwnWritesAreNot() throws {
        let server = try PostgresServer()
        let f = try CLIFixture(vault: try server.createDatabase("heard"))
        let here = try opened(f), there = try opened(f)
        let listener = try #require(here.changeListener())
        #expect(heard(listener, within: 0.3) == nil)  // connected, nothing committed yet

        let deploy = try there.makeDictionary(at: VaultPath("deploy"), withIntermediates: false)
        guard case .changed(.nodes(let made))? = heard(listener, within: 5) else {
            Issue.record("no notice naming nodes for a new dictionary")
            return
        }
        #expect(made.isSuperset(of: [deploy.id, NodeID.root]), "\(made)")

        // This process's own write is skipped: the next notice is the other session's.
        let mine = try here.makeDictionary(at: VaultPath("mine"), withIntermediates: false)
        let key = try there.store(try secret("k3y"), at: VaultPath("deploy/key"))
        guard case .changed(.nodes(let stored))? = heard(listener, within: 5) else {
            Issue.record("no notice naming nodes for a stored item")
            return
        }
        #expect(stored.isSuperset(of: [key.id, deploy.id]) && !stored.contains(mine.id), "\(stored)")

        // A move names the dictionary it left as well as the one it entered.
        let archive = try there.makeDictionary(at: VaultPath("archive"), withIntermediates: false)
        _ = heard(listener, within: 5)
        try there.move(ItemName("key"), from: deploy.id, to: ItemName("key"), in: archive.id)
        guard case .changed(.nodes(let moved))? = heard(listener, within: 5) else {
            Issue.record("no notice naming nodes for a moved item")
            return
        }
        #expect(moved.isSuperset(of: [key.id, deploy.id, archive.id]), "\(moved)")

        try there.remove(named: ItemName("key"), in: archive.id, kind: .item)
        guard case .changed(.nodes(let removed))? = heard(listener, within: 5) else {
            Issue.record("no notice naming nodes for a removed item")
            return
        }
        #expect(removed.isSuperset(of: [key.id, archive.id]), "\(removed)")
    }

    @Test func aVaultFileHasNoListener() throws {
        let f = try CLIFixture()
        #expect(try opened(f).changeListener() == nil)
    }
}
