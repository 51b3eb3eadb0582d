import Foundation
import Glibc
import Testing

/// The clients people use, each as its distribution ships it: it stores a secret through the
/// Secret Service, reads it back, removes it, and the item is a file in the mount meanwhile
/// (gone after). One vault, mount and bus serve the whole suite: each test leaves nothing behind.
@Suite(.serialized, .tags(.mount, .bus), SharedSecretService())
struct RealClientTests {
    @Test func secretTool() throws {
        let s = try SharedSecretService.fixture()
        let stored = try s.secretTool(["store", "--label=Real client mail", "service", "imap.example.org", "user", "ann"], stdin: "s3cret-tool")
        #expect(stored.status == 0, "\(stored.stderr)")
        let looked = try s.secretTool(["lookup", "service", "imap.example.org", "user", "ann"])
        #expect(looked.status == 0 && looked.stdoutText == "s3cret-tool", "\(looked.stderr)")
        let file = try #require(itemFile(s, "service", "imap.example.org"))
        #expect(file == s.path("login/Real client mail"))
        #expect(readFile(file) == Array("s3cret-tool".utf8))
        #expect(xattr(file, "user.user") == "ann")

        #expect(try s.secretTool(["clear", "service", "imap.example.org", "user", "ann"]).status == 0)
        #expect(!FileManager.default.fileExists(atPath: file))
        #expect(try s.secretTool(["lookup", "service", "imap.example.org", "user", "ann"]).stdoutText == "")
    }

    @Test func pythonKeyring() throws {
        let s = try SharedSecretService.fixture()
        let backend = ["PYTHON_KEYRING_BACKEND": "keyring.backends.SecretService.Keyring"]
        let stored = try s.python("""
            import keyring
            print(type(keyring.get_keyring()).__module__)
            keyring.set_password('pypi.example.org', 'ann', 'k3yring-pw')
            print(keyring.get_password('pypi.example.org', 'ann'))
            """, environment: backend)
        #expect(stored.status == 0, "\(stored.stderr)")
        #expect(stored.stdoutText == "keyring.backends.SecretService\nk3yring-pw\n")
        let file = try #require(itemFile(s, "service", "pypi.example.org"))
        #expect(readFile(file) == Array("k3yring-pw".utf8))
        #expect(xattr(file, "user.username") == "ann")

        let removed = try s.python("""
            import keyring
            keyring.delete_password('pypi.example.org', 'ann')
            print(keyring.get_password('pypi.example.org', 'ann'))
            """, environment: backend)
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(removed.stdoutText == "None\n")
        #expect(!FileManager.default.fileExists(atPath: file))
    }

    @Test func pythonSecretstorage() throws {
        let s = try SharedSecretService.fixture()
        let stored = try s.python("""
            import secretstorage
            connection = secretstorage.dbus_init()
            collection = secretstorage.get_default_collection(connection)
            item = collection.create_item('Real client storage', {'app': 'secretstorage-test'}, b'st0rage-pw')
            print(item.get_secret().decode())
            """)
        #expect(stored.status == 0, "\(stored.stderr)")
        #expect(stored.stdoutText == "st0rage-pw\n")
        let file = try #require(itemFile(s, "app", "secretstorage-test"))
        #expect(file == s.path("login/Real client storage"))
        #expect(readFile(file) == Array("st0rage-pw".utf8))

        let removed = try s.python("""
            import secretstorage
            connection = secretstorage.dbus_init()
            collection = secretstorage.get_default_collection(connection)
            items = list(collection.search_items({'app': 'secretstorage-test'}))
            assert len(items) == 1, items
            items[0].delete()
            print(len(list(collection.search_items({'app': 'secretstorage-test'}))))
            """)
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(removed.stdoutText == "0\n")
        #expect(!FileManager.default.fileExists(atPath: file))
    }

    /// git's own helper, compiled from the source Debian's git package ships (it ships no binary).
    @Test func gitCredentialHelper() throws {
        let s = try SharedSecretService.fixture()
        let helper = try SharedSecretService.gitHelper()
        let git = { (action: String, input: String) throws -> RunResult in
            // The empty value first drops any helper a system or global configuration names.
            try run("/usr/bin/git", ["-c", "credential.helper=", "-c", "credential.helper=\(helper)", "credential", action],
                    stdin: Data(input.utf8),
                    environment: s.bus.environment.merging(["GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/false",
                                                            "GIT_CONFIG_NOSYSTEM": "1", "HOME": s.cli.directory]) { $1 })
        }
        let request = "protocol=https\nhost=git.example.org\nusername=ann\n"
        let approved = try git("approve", request + "password=g1t-token\n\n")
        #expect(approved.status == 0, "\(approved.stderr)")
        let filled = try git("fill", request + "\n")
        #expect(filled.status == 0 && filled.stdoutText.contains("password=g1t-token\n"), "\(filled.stdoutText) \(filled.stderr)")
        let file = try #require(itemFile(s, "server", "git.example.org"))
        #expect(readFile(file) == Array("g1t-token".utf8))
        #expect(xattr(file, "user.user") == "ann")
        #expect(xattr(file, "user.protocol") == "https")

        #expect(try git("reject", request + "\n").status == 0)
        #expect(!FileManager.default.fileExists(atPath: file))
        // Nothing stored: fill has no password to give and no terminal to ask on.
        let after = try git("fill", request + "\n")
        #expect(after.status != 0 && !after.stdoutText.contains("g1t-token"), "\(after.stdoutText)")
    }

    /// Chromium keeps the key that encrypts its cookies and passwords ("Chromium Safe Storage")
    /// in the keyring, made at its first start. It is a large package, so not in scripts/test's list.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium"),
                   "/usr/bin/chromium is not installed (Debian package chromium, left out of scripts/test for its size)"))
    func chromiumSafeStorage() throws {
        let s = try SharedSecretService.fixture()
        let profile = s.cli.directory + "/chromium-profile"
        let started = try run("/usr/bin/timeout", ["90", "/usr/bin/chromium", "--headless=new", "--no-sandbox", "--no-first-run",
                                                   "--disable-gpu", "--password-store=gnome-libsecret", "--user-data-dir=" + profile,
                                                   "--dump-dom", "about:blank"],
                              environment: s.bus.environment.merging(["HOME": s.cli.directory]) { $1 })
        #expect(started.status == 0, "\(started.stderr.suffix(2000))")
        try? FileManager.default.removeItem(atPath: profile)
        let file = try #require(itemFile(s, "application", "chromium"), "no Chromium item: \(started.stderr.suffix(2000))")
        #expect(file == s.path("login/Chromium Safe Storage"))
        let key = try s.secretTool(["lookup", "application", "chromium"])
        #expect(key.status == 0 && !key.stdout.isEmpty)
        #expect(readFile(file).map { Data($0) } == key.stdout)

        #expect(try s.secretTool(["clear", "application", "chromium"]).status == 0)
        #expect(!FileManager.default.fileExists(atPath: file))
    }

    /// The file in the default collection's dictionary whose `user.<attribute>` is `value`.
    private func itemFile(_ s: SecretServiceFixture, _ attribute: String, _ value: String) -> String? {
        listing(s.path("login")).map { s.path("login/" + $0) }.first { xattr($0, "user." + attribute) == value }
    }

    /// Through getfattr: Glibc's module map leaves sys/xattr.h out.
    private func xattr(_ path: String, _ name: String) -> String? {
        guard let got = try? run("/usr/bin/getfattr", ["--only-values", "-n", name, path]), got.status == 0 else { return nil }
        return got.stdoutText
    }
}
