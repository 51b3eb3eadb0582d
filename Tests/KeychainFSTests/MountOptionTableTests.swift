import ArgumentParser
@testable import Daemon
import Foundation
@testable import KeychainFS
import Testing
import VaultCore

/// Every mount option is declared once, in `MountOption.all`: the command line, mount(8)'s
/// `-o` words and the request sent to the daemon all say the same thing.
@Suite struct MountOptionTableTests {
    private static let subcommands = Set(KeychainFSCommand.configuration.subcommands.map { $0._commandName } + ["help"])

    /// A value the option takes that is not its default.
    private static func sample(_ option: MountOption) -> String? {
        switch option.value {
        case .none: Optional<String>.none
        case .text: "/some/where else"
        case .number(let range): String(range.lowerBound + 7)
        case .duration: "15m"
        case .kdf: KDFPreset.interactive.rawValue
        case .repeated(let choices): choices[0]
        case .choice(let choices): choices.last
        }
    }

    private static func parsed(_ arguments: [String]) throws -> MountRequest {
        let command = try #require(try KeychainFSCommand.parseAsRoot(arguments) as? Mount, "\(arguments)")
        return try command.request
    }

    @Test func withoutOptionsTheRequestIsTheDefaultOne() throws {
        #expect(try Self.parsed(["mount", "--vault", "/v", "/m"]) == MountRequest(vault: .init(location: "/v"), mountpoint: "/m"))
    }

    @Test(arguments: MountOption.all.map(\.name))
    func everyOptionMeansTheSameOnTheCommandLineInItsWordAndAcrossThePipe(name: String) throws {
        let option = try #require(MountOption.all.first { $0.name == name })
        let value = Self.sample(option)
        // --replace goes with --secret-service; every other option stands alone.
        let companion = name == "replace" ? ["--secret-service"] : []
        let base = try Self.parsed(["mount", "--vault", "/v"] + companion + ["/m"])
        let line = ["mount", "--vault", "/v"] + companion + ["--" + name] + (value.map { [$0] } ?? []) + ["/m"]
        let fromLine = try Self.parsed(line)
        #expect(fromLine != base, "\(line) changes nothing")
        var direct = base
        try option.apply(&direct, value ?? "")
        #expect(fromLine == direct)
        // What the daemon reads is what the command line said.
        #expect(try JSONDecoder().decode(MountRequest.self, from: JSONEncoder().encode(fromLine)) == fromLine)

        let word: String? = if case .repeated = option.value { value } else { option.word.map { word in value.map { "\(word)=\($0)" } ?? word } }
        guard let word, companion.isEmpty else { return }
        let translated = try #require(try MountHelperArguments.translate(["/v", "/m", "-o", word], subcommands: Self.subcommands))
        var quiet = fromLine
        quiet.quiet = true  // the helper form always is
        #expect(try Self.parsed(translated) == quiet, "-o \(word)")
    }

    /// A value the table refuses is refused in both forms, with the table's words.
    @Test func aValueTheTableRefusesIsRefusedOnTheCommandLineAndAsAWord() throws {
        for option in MountOption.all {
            switch option.value {
            case .none, .text: continue
            case .number, .duration, .kdf, .repeated, .choice: break
            }
            var scratch = MountRequest(vault: .init(location: ""), mountpoint: "")
            let takes = try #require(throws: MountOption.Refusal.self) { try option.apply(&scratch, "soon") }.takes
            do {
                _ = try KeychainFSCommand.parseAsRoot(["mount", "--" + option.name, "soon", "/m"])
                Issue.record("--\(option.name) soon was taken")
            } catch {
                // A preset is ArgumentParser's to refuse, naming the presets, as before the table.
                if case .kdf = option.value { continue }
                #expect(KeychainFSCommand.message(for: error) == "--\(option.name) \(takes)")
            }
            guard let word = option.word else { continue }
            #expect(throws: MountHelperArguments.Refusal.self) {
                try MountHelperArguments.translate(["/v", "/m", "-o", word + "=soon"], subcommands: Self.subcommands)
            }
        }
    }

    /// The words mount(8) passes that the table knows, and none other than the table's.
    @Test func everyWordIsTheTables() throws {
        let words = MountOption.all.compactMap(\.word)
        #expect(Set(words).count == words.count)
        #expect(Set(words).isSuperset(of: ["passfile", "idle_lock", "remount_wait", "log_days", "log_entries", "busy_poll_us", "sync",
                                           "secret_service", "accept_rollback", "transport"]))
        #expect(throws: MountHelperArguments.Refusal.self) {
            try MountHelperArguments.translate(["/v", "/m", "-o", "confirm_timeout=1"], subcommands: Self.subcommands)
        }
    }

    /// Private options (a test's knobs, what mount(8) alone passes) are accepted, never shown;
    /// what only the launcher and its daemon said to each other is no option at all.
    @Test func privateOptionsAreNeverShownAndTheDaemonsAreGone() throws {
        let hidden = MountOption.all.filter { !$0.isPublic }.map { "--" + $0.name }
        #expect(hidden.count == 3)
        let help = try run(keychainfsBinary, ["mount", "--help-hidden"]).stdoutText
        #expect(help.contains("--idle-lock") && help.contains("--busy-poll-us"))
        let dump = try run(keychainfsBinary, ["--experimental-dump-help"]).stdoutText
        let completions = try ["bash", "zsh", "fish"].map { try run(keychainfsBinary, ["--generate-completion-script", $0]).stdoutText }
        for name in hidden {
            #expect(!help.contains(name), "\(name) in --help-hidden")
            for script in completions { #expect(!script.contains(String(name.dropFirst(2))), "\(name) in a completion script") }
        }
        for gone in ["--ready-fd", "--passphrase-fd"] {
            #expect(!dump.contains(gone.dropFirst(2)), "\(gone) is still an option")
            let refused = try run(keychainfsBinary, ["mount", gone, "3", "/nowhere"])
            #expect(refused.exitStatus == .usage, "\(refused.stderr)")
        }
        // The daemon's own command line reads its request from a pipe, not from its arguments.
        let stray = try run(keychainfsBinary, ["mount", BackgroundLaunch.daemonFlag, "/nowhere"])
        #expect(stray.exitStatus == .usage && stray.stderr.contains("started by keychainfs mount"), "\(stray.stderr)")
    }

    /// The daemon's arguments say which mountpoint and nothing else: every option, and the vault,
    /// reached it in the request.
    @Test func theDaemonsCommandLineIsItsMountpointOnly() throws {
        let m = try MountFixture()
        try #require(m.unmount().exitStatus == .success)
        try #require(m.mount(extra: ["--idle-lock", "1h", "--confirm-with", "exit 1", "--confirm-timeout", "5"]).exitStatus == .success)
        let pid = try #require(RuntimeState.read(mountpoint: m.mountpoint)?.pid)
        let commandLine = procText("/proc/\(pid)/cmdline").split(separator: "\0").map(String.init)
        #expect(commandLine == ["keychainfs", "mount", BackgroundLaunch.daemonFlag, m.mountpoint])
        // And the request's options reached it.
        let status = try run(keychainfsBinary, ["status", m.mountpoint])
        #expect(status.stdoutText.contains("idle lock: after 3600 s"), "\(status.stdoutText)")
    }
}
