import Foundation
@testable import KeychainFS
import Testing

/// `keychainfs member init` and `member show`.
@Suite struct MemberCLITests {
    @Test func initWritesTheKeyUnderXDGDataHomeAndShowPrintsItsPublicKey() throws {
        let f = try CLIFixture(create: false)
        let environment = ["XDG_DATA_HOME": f.directory + "/data"]
        let made = try run(keychainfsBinary, ["member", "init", "--kdf", "interactive", "--passphrase-file", f.passphraseFile],
                           environment: environment)
        #expect(made.exitStatus == .success, "\(made.stderr)")
        let path = f.directory + "/data/keychainfs/member.key"
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(stat(f.directory + "/data/keychainfs", &info) == 0 && info.st_mode & 0o777 == 0o700)
        let publicKey = try #require(made.stdoutText.split(separator: "\n").last.map(String.init))
        #expect(publicKey.count == 44)

        // No passphrase asked (standard input is /dev/null): the public key is stored in clear.
        let shown = try run(keychainfsBinary, ["member", "show"], environment: environment)
        #expect(shown.exitStatus == .success, "\(shown.stderr)")
        #expect(shown.stdoutText.split(separator: "\n").last.map(String.init) == publicKey)
    }

    @Test func initRefusesToOverwriteAKey() throws {
        let f = try CLIFixture(create: false)
        let path = f.directory + "/member.key"
        let first = try run(keychainfsBinary, ["member", "init", "--member-key", path, "--kdf", "interactive", "--passphrase-file", f.passphraseFile])
        #expect(first.exitStatus == .success, "\(first.stderr)")
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let second = try run(keychainfsBinary, ["member", "init", "--member-key", path, "--kdf", "interactive", "--passphrase-file", f.passphraseFile])
        #expect(second.exitStatus != .success)
        #expect(second.stderr.contains("refusing to overwrite"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
    }

    @Test func showWithoutAKeySaysHowToMakeOne() throws {
        let f = try CLIFixture(create: false)
        let shown = try run(keychainfsBinary, ["member", "show", "--member-key", f.directory + "/none.key"])
        #expect(shown.exitStatus != .success)
        #expect(shown.stderr.contains("member init"))
    }
}
