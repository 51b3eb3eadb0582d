import Foundation
import Glibc
import Testing

/// `import secret-service` from a real gnome-keyring-daemon on a private bus (items stored with
/// secret-tool, a second collection from a keyring file, a binary secret), and its refusal to
/// import from a KeychainFS serving the same vault.
@Suite(.serialized, .tags(.bus, .slow)) struct SecretServiceImportTests {
    /// A keyring file in gnome-keyring's unencrypted text format: a second collection, locked
    /// until Unlock is called (gnome-keyring unlocks it without a prompt).
    static let workKeyring = """
        [keyring]
        display-name=Work Keys
        ctime=0
        mtime=0
        lock-on-idle=false
        lock-after=false

        [1]
        item-type=0
        display-name=Deploy key
        secret=deploy-secret
        mtime=0
        ctime=0

        [1:attribute0]
        name=service
        type=string
        value=deploy

        """

    private func kfs(_ f: CLIFixture, _ bus: PrivateSessionBus, _ arguments: [String]) throws -> RunResult {
        try run(keychainfsBinary, arguments + ["--vault", f.vault, "--passphrase-file", f.passphraseFile], environment: bus.environment)
    }

    @Test func importsEveryCollectionOnceFromGnomeKeyring() throws {
        let f = try CLIFixture()
        let bus = try PrivateSessionBus()
        let keyring = try GnomeKeyringDaemon(bus: bus, directory: f.directory, keyrings: ["work.keyring": Self.workKeyring])
        defer { keyring.stop() }
        func store(_ label: String, _ attributes: [String], _ secret: Data) throws {
            let stored = try run("/usr/bin/secret-tool", ["store", "--label=" + label] + attributes, stdin: secret, environment: bus.environment)
            #expect(stored.status == 0, "\(label): \(stored.stderr)")
        }
        try store("GitHub token", ["service", "github", "user", "alice"], Data("hunter2".utf8))
        try store("GitHub token", ["service", "github", "user", "bob"], Data("other, \"quoted\"".utf8))
        try store("Binary/blob", ["service", "blob"], Data([0xFF, 0x00, 0xFE, 0x80, 0x0A]))

        let dry = try kfs(f, bus, ["import", "secret-service", "--dry-run"])
        #expect(dry.exitStatus == .success, "\(dry.stderr)")
        #expect(dry.stdoutText.split(separator: "\n").sorted() == ["Work Keys/Deploy key", "login/Binary_blob", "login/GitHub token", "login/GitHub token 2"],
                "\(dry.stdoutText)")
        #expect(dry.stderr.contains("4 items would be imported; 0 already here"), "\(dry.stderr)")
        #expect(!dry.stdoutText.contains("hunter2") && !dry.stderr.contains("hunter2") && !dry.stderr.contains("deploy-secret"))
        #expect(try kfs(f, bus, ["ls"]).stdoutText == "", "a dry run stores nothing")

        let first = try kfs(f, bus, ["import", "secret-service"])
        #expect(first.exitStatus == .success, "\(first.stderr)")
        #expect(first.stderr.contains("imported 4 items"), "\(first.stderr)")
        #expect(!first.stderr.contains("in the clear"), "an encrypted session: \(first.stderr)")

        // Which of the two same-labelled items got which name follows the service's order: found by attribute.
        let alice = try kfs(f, bus, ["find", "user=alice"])
        #expect(alice.exitStatus == .success, "\(alice.stderr)")
        let alicePath = alice.stdoutText.trimmingCharacters(in: .newlines)
        #expect(alicePath.hasPrefix("login/GitHub token"))
        #expect(try kfs(f, bus, ["get", alicePath]).stdoutText == "hunter2")
        #expect(try kfs(f, bus, ["attr", alicePath]).stdoutText.contains("service=github\nuser=alice"))
        #expect(try kfs(f, bus, ["label", alicePath]).stdoutText.hasPrefix("GitHub token"))
        let bob = try kfs(f, bus, ["find", "user=bob"]).stdoutText.trimmingCharacters(in: .newlines)
        #expect(try kfs(f, bus, ["get", bob]).stdoutText == "other, \"quoted\"")
        #expect(try kfs(f, bus, ["get", "login/Binary_blob"]).stdout == Data([0xFF, 0x00, 0xFE, 0x80, 0x0A]))
        #expect(try kfs(f, bus, ["label", "login/Binary_blob"]).stdoutText.hasPrefix("Binary/blob"))
        #expect(try kfs(f, bus, ["get", "Work Keys/Deploy key"]).stdoutText == "deploy-secret")
        #expect(try kfs(f, bus, ["attr", "Work Keys/Deploy key"]).stdoutText.contains("service=deploy"))
        #expect(try kfs(f, bus, ["label", "Work Keys"]).stdoutText.hasPrefix("Work Keys"))

        let second = try kfs(f, bus, ["import", "secret-service"])
        #expect(second.exitStatus == .success, "\(second.stderr)")
        #expect(second.stderr.contains("imported 0 items"), "\(second.stderr)")
        #expect(second.stderr.contains("4 items were already here"), "\(second.stderr)")
        #expect(try kfs(f, bus, ["ls", "login"]).stdoutText.split(separator: "\n").count == 3)

        // A new item at the source comes on the next run; the rest stays as it is.
        try store("Mail", ["service", "imap"], Data("imap-pw".utf8))
        let third = try kfs(f, bus, ["import", "secret-service"])
        #expect(third.stderr.contains("imported 1 item"), "\(third.stderr)")
        #expect(try kfs(f, bus, ["get", "login/Mail"]).stdoutText == "imap-pw")
    }

    @Test func refusesTheServiceOfTheSameVault() throws {
        let f = try CLIFixture()
        let bus = try PrivateSessionBus()
        let service = try startProcess(keychainfsBinary, ["secret-service", "--vault", f.vault, "--passphrase-file", f.passphraseFile],
                                       environment: bus.environment)
        defer { service.terminate(); service.waitUntilExit() }
        #expect(eventually(within: 20) {
            (try? run(keychainfsBinary, ["secret-service", "--status"], environment: bus.environment))?.exitStatus == .success
        })
        let refused = try kfs(f, bus, ["import", "secret-service"])
        #expect(refused.exitStatus == .invalidInput, "\(refused.stderr)")
        #expect(refused.stderr.contains("from this same vault"), "\(refused.stderr)")

        // Another vault may import from it.
        let other = try CLIFixture()
        let stored = try run("/usr/bin/secret-tool", ["store", "--label=Note", "k", "v"], stdin: Data("from-keychainfs".utf8),
                             environment: bus.environment)
        #expect(stored.status == 0, "\(stored.stderr)")
        let copied = try kfs(other, bus, ["import", "secret-service"])
        #expect(copied.exitStatus == .success, "\(copied.stderr)")
        #expect(copied.stderr.contains("imported 1 item"), "\(copied.stderr)")
    }

    /// A locked source: the import calls Unlock and follows the prompt (Prompt.Prompt, then the
    /// Completed signal), here KeychainFS's own, which runs its --extpass; the items come.
    @Test func unlocksALockedSourceThroughItsPrompt() throws {
        let source = try CLIFixture()
        let bus = try PrivateSessionBus()
        let service = try startProcess(keychainfsBinary, ["secret-service", "--vault", source.vault, "--extpass", "cat " + source.passphraseFile],
                                       environment: bus.environment)
        defer { service.terminate(); service.waitUntilExit() }
        #expect(eventually(within: 20) {
            (try? run(keychainfsBinary, ["secret-service", "--status"], environment: bus.environment))?.exitStatus == .success
        })
        let stored = try run("/usr/bin/secret-tool", ["store", "--label=Locked away", "kind", "pin"], stdin: Data("4321".utf8),
                             environment: bus.environment)
        #expect(stored.status == 0, "\(stored.stderr)")
        let lock = try run("/usr/bin/python3", ["-c", """
            import dbus
            bus = dbus.SessionBus()
            root = bus.get_object('org.freedesktop.secrets', '/org/freedesktop/secrets', introspect=False)
            paths = root.Get('org.freedesktop.Secret.Service', 'Collections', dbus_interface='org.freedesktop.DBus.Properties')
            dbus.Interface(root, 'org.freedesktop.Secret.Service').Lock(dbus.Array(list(paths), signature='o'), signature='ao')
            print(all(bus.get_object('org.freedesktop.secrets', p, introspect=False).Get('org.freedesktop.Secret.Collection', 'Locked',
                  dbus_interface='org.freedesktop.DBus.Properties') for p in paths))
            """], environment: bus.environment)
        #expect(lock.stdoutText == "True\n", "\(lock.stdoutText) \(lock.stderr)")

        let f = try CLIFixture()
        let copied = try kfs(f, bus, ["import", "secret-service"])
        #expect(copied.exitStatus == .success, "\(copied.stderr)")
        #expect(copied.stderr.contains("imported 1 item"), "\(copied.stderr)")
        let found = try kfs(f, bus, ["find", "kind=pin"]).stdoutText.trimmingCharacters(in: .newlines)
        #expect(found.hasSuffix("/Locked away"), "\(found)")
        #expect(try kfs(f, bus, ["get", found]).stdoutText == "4321")
    }
}
