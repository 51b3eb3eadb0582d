@testable import Admission
import Foundation
@testable import Support
import Testing
import VaultCore

/// The daemon's access log writer, driven directly, checked through the vault and `keychainfs log`.
struct AccessLogWriterTests {
    /// A vault (made by the CLI) with `app/token`, open in this process as a mount would hold it.
    private func fixture() throws -> (CLIFixture, Vault, NodeID) {
        let cli = try CLIFixture()
        #expect(try cli.cli(["set", "app/token"], stdin: Data("x".utf8)).exitStatus == .success)
        let vault = try Vault.open(at: cli.vault, passphrase: try SecretInput.passphrase(file: cli.passphraseFile, command: nil,
                                                                                          prompt: "", confirm: false))
        return (cli, vault, try vault.node(at: VaultPath("app/token")).id)
    }

    /// Waits for a condition the writer brings about, failing after `seconds`.
    private func waitUntil(seconds: Double = 10, _ condition: () throws -> Bool) throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try condition() { return true }
            usleep(20_000)
        }
        return try condition()
    }

    private func logJSON(_ cli: CLIFixture, _ arguments: [String] = []) throws -> [[String: Any]] {
        let result = try cli.cli(["log", "--json"] + arguments)
        #expect(result.exitStatus == .success, "\(result.stderr)")
        return try JSONSerialization.jsonObject(with: result.stdout) as? [[String: Any]] ?? []
    }

    @Test func recordsFromManyThreadsAreCommittedInFewBatchesWithinSeconds() throws {
        let (cli, vault, token) = try fixture()
        let writer = try #require(try AccessLogWriter(vault: vault, bounds: .default))
        writer.start()
        defer { writer.stop() }
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for _ in 0..<100 { writer.record(pid: getpid(), access: .read, decision: .allowed, node: token) }
        }
        // No flush asked for: the writer's own thread commits them.
        #expect(try waitUntil { try vault.accessLogSummary().entries == 800 })
        #expect(try vault.accessLogSummary().batches <= 12, "batched, not one commit per record")
        let entries = try logJSON(cli)
        #expect(entries.count == 800)
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        #expect(entries.allSatisfy { $0["path"] as? String == "app/token" && $0["pid"] as? Int == Int(getpid()) })
        #expect(entries.allSatisfy { $0["executable"] as? String == exe && $0["access"] as? String == "read" })
        #expect(writer.pendingCount == 0)
    }

    /// Stopping (an unmount) does not wait out the interval between two flushes: a mount of
    /// the vault right after `umount` waits for this daemon. What was pending is still stored.
    @Test func stoppingDoesNotWaitOutTheInterval() throws {
        let (_, vault, token) = try fixture()
        let writer = try #require(try AccessLogWriter(vault: vault, bounds: .default))
        writer.start()
        writer.record(pid: getpid(), access: .read, decision: .allowed, node: token)
        #expect(try waitUntil { try vault.accessLogSummary().entries == 1 })
        // The flush just made: the thread now waits a whole interval before the next.
        writer.record(pid: getpid(), access: .read, decision: .allowed, node: token)
        usleep(50_000)
        let started = Date()
        writer.stop()
        #expect(Date().timeIntervalSince(started) < 0.5, "stop waited \(Date().timeIntervalSince(started)) s")
        #expect(try vault.accessLogSummary().entries == 2)
    }

    @Test func flushAtLockWritesWhileTheVaultIsLocked() throws {
        let (cli, vault, token) = try fixture()
        let writer = try #require(try AccessLogWriter(vault: vault, bounds: .default))
        vault.lock()
        writer.record(pid: getpid(), access: .read, decision: .denied(reason: "the vault is locked"), node: token)
        writer.record(AccessLogEntry(pid: 0, access: .lock, decision: .allowed))
        // Not started: only the explicit flush (what a lock calls) writes.
        try writer.flush()
        #expect(try vault.accessLogSummary().entries == 2)
        let entries = try logJSON(cli)
        #expect(entries.count == 2)
        // Written by node while locked; resolved by the reader, who has the keys.
        #expect(entries.first?["path"] as? String == "app/token" && entries.first?["decision"] as? String == "denied")
        #expect(entries.last?["access"] as? String == "lock" && entries.last?["pid"] as? Int == 0 && entries.last?["path"] == nil)
    }

    @Test func aCreateIsLoggedWithTheNewName() throws {
        let (cli, vault, _) = try fixture()
        let writer = try #require(try AccessLogWriter(vault: vault, bounds: .default))
        let app = try vault.node(at: VaultPath("app")).id
        writer.record(pid: getpid(), access: .write, decision: .denied(reason: "no rule"), node: app, name: try ItemName("new"))
        writer.stop()  // flushes what is pending
        #expect(try logJSON(cli).map { $0["path"] as? String } == ["app/new"])
    }

    @Test func zeroBoundsTurnLoggingOff() throws {
        let (_, vault, _) = try fixture()
        #expect(try AccessLogWriter(vault: vault, bounds: AccessLogBounds(days: 0, entries: 10)) == nil)
        #expect(try AccessLogWriter(vault: vault, bounds: AccessLogBounds(days: 10, entries: 0)) == nil)
    }

    @Test func processLabelsReadProcOncePerPidAndSecond() throws {
        let labels = ProcessLabels()
        let first = labels.label(for: getpid())
        for _ in 0..<1000 { #expect(labels.label(for: getpid()) == first) }
        #expect(labels.reads == 1)
        #expect(first.executable == (try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")))
        #expect(labels.label(for: 0) == ProcessLabels.Label(executable: nil, unit: nil))
        #expect(labels.reads == 1)
    }
}
