import CSQLite
import Foundation
@testable import Support
import Testing
import VaultCore

/// `keychainfs log` over a vault whose log this process wrote.
struct AccessLogCLITests {
    private func open(_ cli: CLIFixture) throws -> Vault {
        try Vault.open(at: cli.vault, passphrase: try SecretInput.passphrase(file: cli.passphraseFile, command: nil, prompt: "", confirm: false))
    }

    private func entry(_ path: String?, secondsAgo: Int64 = 0, access: LoggedAccess = .read,
                       decision: LoggedDecision = .allowed) throws -> AccessLogEntry {
        AccessLogEntry(time: Timestamp(seconds: Timestamp.now().seconds - secondsAgo, nanoseconds: 5), pid: 321,
                       executable: "/usr/bin/cat", unit: "app.service", path: try path.map { try VaultPath($0) },
                       access: access, decision: decision)
    }

    private func populated() throws -> CLIFixture {
        let cli = try CLIFixture()
        try open(cli).appendAccessLog([
            try entry("app/token", secondsAgo: 7200),
            try entry("app", secondsAgo: 60, access: .list, decision: .denied(reason: "no access rule admits process 321")),
            try entry("apple", secondsAgo: 30),
            try entry(nil, secondsAgo: 10, access: .lock),
            try entry("app/token", access: .write, decision: .confirmed(false)),
        ])
        return cli
    }

    private func paths(_ result: RunResult) -> [String?] {
        ((try? JSONSerialization.jsonObject(with: result.stdout)) as? [[String: Any]] ?? []).map { $0["path"] as? String }
    }

    @Test func textLinesOnePerEntry() throws {
        let cli = try populated()
        let result = try cli.cli(["log"])
        #expect(result.exitStatus == .success, "\(result.stderr)")
        let lines = result.stdoutText.split(separator: "\n").map(String.init)
        #expect(lines.count == 5)
        let fields = lines[0].components(separatedBy: "  ")
        #expect(fields.count == 7 && fields[0].hasSuffix(".000000005Z") && fields[0].contains("T"))
        #expect(Array(fields[1...]) == ["321", "/usr/bin/cat", "app.service", "read", "allowed", "app/token"])
        #expect(lines[1].hasSuffix("list  denied (no access rule admits process 321)  app"))
        #expect(lines[3].hasSuffix("lock  allowed  -"))
        #expect(lines[4].hasSuffix("write  refused  app/token"))
    }

    @Test func jsonSinceDeniedAndPathFilters() throws {
        let cli = try populated()
        let all = try cli.cli(["log", "--json"])
        #expect(paths(all) == ["app/token", "app", "apple", nil, "app/token"])
        let object = try #require((try JSONSerialization.jsonObject(with: all.stdout) as? [[String: Any]])?[1])
        #expect(object["decision"] as? String == "denied" && object["reason"] as? String == "no access rule admits process 321")
        #expect(object["unit"] as? String == "app.service" && object["access"] as? String == "list" && object["pid"] as? Int == 321)
        #expect(paths(try cli.cli(["log", "--json", "--since", "1h"])) == ["app", "apple", nil, "app/token"])
        #expect(paths(try cli.cli(["log", "--json", "--since", "45s"])) == ["apple", nil, "app/token"])
        #expect(paths(try cli.cli(["log", "--json", "--denied"])) == ["app", "app/token"])
        // At or below the path, by whole names: not `apple`, not events of no path.
        #expect(paths(try cli.cli(["log", "--json", "app"])) == ["app/token", "app", "app/token"])
        #expect(paths(try cli.cli(["log", "--json", "app/token", "--denied"])) == ["app/token"])
        #expect(paths(try cli.cli(["log", "--json", "nothing"])) == [])
    }

    @Test func badInputGetsClearErrors() throws {
        let cli = try populated()
        let wrong = try cli.write("wrong\n", to: "wrong-pw")
        let refused = try cli.cli(["log"], passphraseFile: wrong)
        #expect(refused.exitStatus == .wrongPassphrase && refused.stdout.isEmpty && refused.stderr.contains("wrong passphrase"))
        let since = try cli.cli(["log", "--since", "soon"])
        #expect(since.exitStatus == .usage && since.stderr.contains("--since takes a duration"))
        #expect(try cli.cli(["log", "a//../b"]).exitStatus == .invalidInput)
        // Nothing was lost.
        #expect(paths(try cli.cli(["log", "--json"])).count == 5)
    }

    @Test func aTamperedBatchFailsLogAndVerify() throws {
        let cli = try populated()
        try open(cli).appendAccessLog([try entry("later")])
        var db: OpaquePointer?
        #expect(sqlite3_open(cli.vault, &db) == SQLITE_OK)
        #expect(sqlite3_exec(db, "UPDATE access_log SET sealed = (SELECT sealed FROM access_log WHERE sequence = 2) WHERE sequence = 1",
                             nil, nil, nil) == SQLITE_OK)
        sqlite3_close(db)
        let log = try cli.cli(["log", "--json"])
        #expect(log.exitStatus == .integrityFailure)
        #expect(log.stderr.contains("<access log batch 1>: was sealed as batch 2 (moved or copied)"), "\(log.stderr)")
        #expect(paths(log) == ["later"], "the batches that open are still shown")
        let verify = try cli.cli(["verify"])
        #expect(verify.exitStatus == .integrityFailure && verify.stderr.contains("<access log batch 1>"))
    }

    @Test func followPrintsNewEntriesAndStopsCleanly() throws {
        let cli = try populated()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: keychainfsBinary)
        process.arguments = ["log", "--vault", cli.vault, "--passphrase-file", cli.passphraseFile, "--follow", "--json", "--denied"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        var lines: [String] = []
        var buffer = Data()
        func readLines(until count: Int) {
            let deadline = Date().addingTimeInterval(20)
            let fd = output.fileHandleForReading.fileDescriptor
            while lines.count < count && Date() < deadline {
                var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 200) > 0 else { continue }
                var chunk = [UInt8](repeating: 0, count: 4096)
                let n = read(fd, &chunk, chunk.count)
                guard n > 0 else { break }
                buffer.append(contentsOf: chunk[..<n])
                while let newline = buffer.firstIndex(of: 0x0A) {
                    lines.append(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                    buffer.removeSubrange(buffer.startIndex...newline)
                }
            }
        }
        readLines(until: 2)  // the two denials already there, as JSON lines
        #expect(lines.count == 2 && lines.allSatisfy { $0.hasPrefix("{") && $0.contains("\"decision\":\"") })
        try open(cli).appendAccessLog([try entry("allowed/one"), try entry("denied/one", decision: .denied(reason: "r"))])
        readLines(until: 3)
        #expect(lines.count == 3 && lines.last?.contains("\"path\":\"denied/one\"") == true)
        process.terminate()  // SIGTERM
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 0)
    }
}
