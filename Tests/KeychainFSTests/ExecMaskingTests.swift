import Foundation
import Glibc
@testable import KeychainFS
import Testing

/// `keychainfs exec` conceals the secrets it passed in the command's output that is not a
/// terminal, as `op run` does.
@Suite struct ExecMaskingTests {
    static let token = "sek-ret-0123456789"
    static let concealed = "<concealed by keychainfs>"

    private func fixture() throws -> CLIFixture {
        let f = try CLIFixture()
        for (path, value) in [("app/token", Self.token), ("app/short", "abc"), ("app/four", "abcd"), ("tls/key", "KEY-of-the-file")] {
            let stored = try f.cli(["set", path], stdin: Data(value.utf8))
            try #require(stored.exitStatus == .success, "\(stored.stderr)")
        }
        return f
    }

    private func exec(_ f: CLIFixture, _ arguments: [String]) throws -> RunResult {
        try run(keychainfsBinary, ["exec", "--vault", f.vault, "--passphrase-file", f.passphraseFile] + arguments)
    }

    @Test func secretsOnBothStreamsAreConcealedAndTheStatusIsTheCommands() throws {
        let f = try fixture()
        let result = try exec(f, ["--env-dict", "app", "--files", "tls", "--", "/bin/sh", "-c", """
            printf '%s|%s|%s|' "$TOKEN" "$FOUR" "$SHORT"; cat "$KEYCHAINFS_SECRETS_DIR/key"; printf %s "$TOKEN" >&2; exit 3
            """])
        #expect(result.status == 3, "\(result.stderr)")
        // 3 bytes is below the minimum (4): such a value would conceal ordinary text.
        #expect(result.stdoutText == "\(Self.concealed)|\(Self.concealed)|abc|\(Self.concealed)")
        #expect(result.stderr == Self.concealed)
    }

    @Test func aSecretSplitAcrossTwoWritesIsConcealed() throws {
        let f = try fixture()
        let result = try exec(f, ["--env", "TOKEN=app/token", "--", "/bin/sh", "-c", """
            printf 'before %s' "${TOKEN%????????}"; sleep 0.1; printf '%s after\\n' "${TOKEN#??????????}"
            """])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutText == "before \(Self.concealed) after\n")
    }

    @Test func noMaskingLeavesTheOutputAsWritten() throws {
        let f = try fixture()
        let result = try exec(f, ["--no-masking", "--env", "TOKEN=app/token", "--", "/bin/sh", "-c", "printf %s \"$TOKEN\"; printf %s \"$TOKEN\" >&2"])
        #expect(result.stdoutText == Self.token)
        #expect(result.stderr == Self.token)
    }

    @Test func binaryOutputPassesUnchangedButForTheSecret() throws {
        let f = try fixture()
        let urandom = try #require(FileHandle(forReadingAtPath: "/dev/urandom"))
        let random = urandom.readData(ofLength: 1 << 20)
        try urandom.close()
        let input = f.directory + "/binary"
        let expected = random + Data(Self.concealed.utf8) + random
        try (random + Data(Self.token.utf8) + random).write(to: URL(fileURLWithPath: input))
        let result = try exec(f, ["--env", "TOKEN=app/token", "--", "/bin/cat", input])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.count == expected.count)
        #expect(result.stdout == expected)
    }

    @Test func aTerminalGetsTheOutputDirectly() throws {
        let f = try fixture()
        // script(1) gives the command a pseudo-terminal and copies what it shows to our file.
        let command = [keychainfsBinary, "exec", "--vault", f.vault, "--passphrase-file", f.passphraseFile,
                       "--env", "TOKEN=app/token", "--", "/bin/sh", "-c", "printf '%s\\n' \"$TOKEN\""]
            .map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        let result = try run("/usr/bin/script", ["-qec", command, "/dev/null"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutText.contains(Self.token), "\(result.stdoutText)")
    }
}
