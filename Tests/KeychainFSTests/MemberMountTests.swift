import Foundation
import Glibc
import Testing

/// A vault mounted by a member: opened and unlocked with the member key's passphrase.
@Suite(.tags(.mount)) struct MemberMountTests {
    @Test func aMemberMountsAndUnlocksWithTheirOwnKey() throws {
        let m = try MountFixture()
        #expect(mkdir(m.path("deploy"), 0o700) == 0)
        #expect(writeFile(m.path("deploy/key"), Array("team secret".utf8)) == 0)
        #expect(try m.unmount().exitStatus == .success)

        let key = m.cli.directory + "/bob.key"
        let memberPassphrase = try m.cli.write("pw of bob\n", to: "bob.pw")
        let made = try run(keychainfsBinary, ["member", "init", "--member-key", key, "--kdf", "interactive", "--passphrase-file", memberPassphrase])
        #expect(made.exitStatus == .success, "\(made.stderr)")
        let publicKey = String(made.stdoutText.split(separator: "\n").last ?? "")
        let added = try run(keychainfsBinary, ["member", "add", "--vault", m.vault, "--passphrase-file", m.cli.passphraseFile, publicKey, "--name", "bob"])
        #expect(added.exitStatus == .success, "\(added.stderr)")

        let mounted = try m.mount(passphraseFile: memberPassphrase, extra: ["--member-key", key])
        #expect(mounted.exitStatus == .success, "\(mounted.stderr)")
        #expect(readFile(m.path("deploy/key")) == Array("team secret".utf8))

        #expect(try run(keychainfsBinary, ["lock", m.mountpoint]).exitStatus == .success)
        // The vault's passphrase is not the key to this mount: the member's is.
        let refused = try run(keychainfsBinary, ["unlock", "--passphrase-file", m.cli.passphraseFile, m.mountpoint])
        #expect(refused.exitStatus == .wrongPassphrase)
        let unlocked = try run(keychainfsBinary, ["unlock", "--passphrase-file", memberPassphrase, m.mountpoint])
        #expect(unlocked.exitStatus == .success, "\(unlocked.stderr)")
        #expect(readFile(m.path("deploy/key")) == Array("team secret".utf8))
    }
}
