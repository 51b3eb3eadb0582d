import ArgumentParser
import Foundation
@testable import KeychainFS
@testable import Support
import Testing
import VaultCore

/// Completions, the man page and the version come from the commands' own definitions; every
/// command that prints data can print JSON.
@Suite struct CommandLineDocsTests {
    /// Every subcommand's name, nested ones too (`import` and its `pass`, `dotenv`, ...); not the
    /// hidden ones (`pam-session`, `pam-passwd`: what the PAM module runs, not for people).
    private func subcommandNames(of command: any ParsableCommand.Type = KeychainFSCommand.self) -> [String] {
        command.configuration.subcommands.filter { $0.configuration.shouldDisplay }
            .flatMap { [$0._commandName] + subcommandNames(of: $0) }
    }

    /// Every command that takes `--no-offline` is one `main` reads it from before it runs: a
    /// command left out would keep (and read) a replica whatever its command line said.
    @Test func everyCommandTakingNoOfflineIsReadForIt() throws {
        func commands(of command: any ParsableCommand.Type = KeychainFSCommand.self) -> [any ParsableCommand.Type] {
            command.configuration.subcommands.flatMap { [$0] + commands(of: $0) }
        }
        var checked = 0
        for command in commands() where command.helpMessage(includeHidden: true).contains("--no-offline") {
            #expect(command is any OpensVault.Type, "\(command._commandName) takes --no-offline but is not OpensVault")
            checked += 1
        }
        #expect(checked > 30)
        // And the command line parsed here changed nothing of this process's setting.
        _ = try KeychainFSCommand.parseAsRoot(["get", "--vault", "postgresql://nowhere/x", "item"])
        #expect(!OfflineReplicas.isEnabled)
    }

    @Test func theVersionIsTheConstant() throws {
        let result = try run(keychainfsBinary, ["--version"])
        #expect(result.status == 0)
        #expect(result.stdoutText == KeychainFSVersion.current + "\n")
        #expect(KeychainFSVersion.current.split(separator: ".").count == 3)
    }

    @Test(arguments: ["bash", "zsh", "fish"]) func completionsNameEverySubcommand(shell: String) throws {
        let result = try run(keychainfsBinary, ["--generate-completion-script", shell])
        #expect(result.status == 0, "\(result.stderr)")
        let script = result.stdoutText
        let names = subcommandNames()
        #expect(names.contains("import") && names.contains("dotenv") && names.contains("export") && names.count > 25)
        for name in names { #expect(script.contains(name), "\(shell) completion lacks \(name)") }
        #expect(script.contains("archive-passphrase-file"))  // fish names long options without the dashes
    }

    @Test(.tags(.manPage)) func theManPageHasEverySubcommand() throws {
        // The tool swift-argument-parser's GenerateManual plugin runs (scripts/test and scripts/setup build it).
        let generator = keychainfsBuildDirectory + "/generate-manual"
        try #require(FileManager.default.isExecutableFile(atPath: generator), "build it with: swift build --product generate-manual")
        let output = NSTemporaryDirectory() + "kfs-man-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: output) }
        let result = try run(generator, [keychainfsBinary, "--output-directory", output])
        #expect(result.status == 0, "\(result.stderr)")
        let page = try String(contentsOfFile: output + "/keychainfs.1", encoding: .utf8)
        #expect(page.contains(".Dt KEYCHAINFS 1"))
        for name in subcommandNames() { #expect(page.contains(".It Em \(name)\n"), "the man page lacks \(name)") }
        // The README points here too for what each exit status means.
        for line in ExitStatus.summary.split(separator: "\n") { #expect(page.contains(line), "the man page lacks: \(line)") }
    }

    @Test func classLabelAndVerifyPrintJSON() throws {
        let f = try CLIFixture()
        try f.cli(["set", "app/token", "t"])
        try f.cli(["class", "app", "after-first-unlock"])
        try f.cli(["label", "app/token", "Token"])

        func json(_ arguments: [String]) throws -> [String: Any] {
            let result = try f.cli(arguments)
            #expect(result.exitStatus == .success, "\(result.stderr)")
            return try #require(try JSONSerialization.jsonObject(with: result.stdout) as? [String: Any])
        }
        let item = try json(["class", "--json", "app/token"])
        #expect(item["path"] as? String == "app/token" && item["kind"] as? String == "item" && item["class"] as? String == "when-unlocked")
        let dictionary = try json(["class", "--json", "app"])
        #expect(dictionary["defaultClass"] as? String == "after-first-unlock")
        #expect(dictionary["effectiveDefaultClass"] as? String == "after-first-unlock")
        let root = try json(["class", "--json", ""])
        #expect(root["defaultClass"] is NSNull && root["effectiveDefaultClass"] as? String == "when-unlocked")

        #expect(try json(["label", "--json", "app/token"])["label"] as? String == "Token")
        #expect(try json(["label", "--json", "app"])["label"] is NSNull)
        #expect(try f.cli(["label", "--json", "app", "new"]).exitStatus != .success)

        let verified = try json(["verify", "--json"])
        #expect(verified["verified"] as? Bool == true)
        #expect((verified["problems"] as? [Any])?.isEmpty == true)
    }
}
