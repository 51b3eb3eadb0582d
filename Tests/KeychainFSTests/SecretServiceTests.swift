import Foundation
import Glibc
@testable import KeychainFS
@testable import Keyring
import Testing

/// The Secret Service through real clients on a private bus, each item then checked through
/// the mount and the command line, and the reverse.
@Suite(.serialized, .tags(.mount, .bus, .slow)) struct SecretServiceTests {
    @Test func secretToolStoresLooksUpSearchesAndClearsThroughTheVault() throws {
        let s = try SecretServiceFixture()
        let stored = try s.secretTool(["store", "--label=Mail password", "service", "imap", "user", "ann"], stdin: "hunter2")
        #expect(stored.status == 0, "\(stored.stderr)")
        let looked = try s.secretTool(["lookup", "service", "imap", "user", "ann"])
        #expect(looked.stdoutText == "hunter2")
        // The item is a file in the default collection's dictionary, login/.
        #expect(readFile(s.path("login/Mail password")) == Array("hunter2".utf8))
        let user = try sh("getfattr --only-values -n user.user '\(s.path("login/Mail password"))'")
        #expect(user.stdoutText == "ann")
        let label = try sh("getfattr --only-values -n keychainfs.label '\(s.path("login/Mail password"))'")
        #expect(label.stdoutText == "Mail password")
        #expect(try s.cli.cli(["get", "login/Mail password"]).stdoutText == "hunter2")

        let searched = try s.secretTool(["search", "--all", "service", "imap"])
        #expect(searched.status == 0)
        #expect(searched.stdoutText.contains("label = Mail password"), "\(searched.stdoutText)")
        #expect(searched.stdoutText.contains("secret = hunter2"))
        // secret-tool writes attributes to standard error.
        #expect(searched.stderr.contains("attribute.user = ann"), "\(searched.stderr)")

        #expect(try s.secretTool(["clear", "service", "imap"]).status == 0)
        #expect(!FileManager.default.fileExists(atPath: s.path("login/Mail password")))
        #expect(try s.secretTool(["lookup", "service", "imap"]).status != 0)
    }

    @Test func aFileMadeThroughTheMountOrTheCLIIsAnItemAndSignalsWithinASecond() throws {
        let s = try SecretServiceFixture()
        // Listens first, then makes an item through the mount and changes it through the CLI.
        let watched = try s.python("""
            from jeepney import MatchRule
            from jeepney.io.blocking import open_dbus_connection, Proxy
            from jeepney.bus_messages import message_bus
            import subprocess
            conn = open_dbus_connection(bus='SESSION')
            rule = MatchRule(type='signal', interface='org.freedesktop.Secret.Collection')
            Proxy(message_bus, conn).AddMatch(rule)
            def wait_for(member, deadline):
                with conn.filter(rule) as queue:
                    pass
            seen = []
            with conn.filter(rule) as queue:
                start = time.monotonic()
                path = sys.argv[0] if False else os.environ['MNT'] + '/login/from-mount'
                with open(path, 'w') as f: f.write('via mount')
                os.setxattr(path, 'user.service', b'mounted')
                while 'ItemCreated' not in seen:
                    msg = conn.recv_until_filtered(queue, timeout=1.0)
                    seen.append(msg.header.fields[3])
                print('created', round(time.monotonic() - start, 3))
                subprocess.run([os.environ['KFS'], 'set', '--vault', os.environ['VAULT'], '--passphrase-file', os.environ['PW'],
                                'login/from-mount'], input=b'via cli', check=True)
                start = time.monotonic()
                seen = []
                while 'ItemChanged' not in seen:
                    msg = conn.recv_until_filtered(queue, timeout=1.0)
                    seen.append(msg.header.fields[3])
                print('changed', round(time.monotonic() - start, 3))
            """, environment: ["MNT": s.mountpoint, "KFS": keychainfsBinary, "VAULT": s.cli.vault, "PW": s.cli.passphraseFile])
        #expect(watched.status == 0, "\(watched.stderr)")
        #expect(watched.stdoutText.contains("created"), "\(watched.stdoutText)")
        #expect(watched.stdoutText.contains("changed"))
        // Its user. attribute is searchable over D-Bus, and its content is the CLI's.
        let looked = try s.secretTool(["lookup", "service", "mounted"])
        #expect(looked.stdoutText == "via cli", "\(looked.stderr)")
    }

    @Test func secretstorageWithBothSessionAlgorithms() throws {
        let s = try SecretServiceFixture()
        // secretstorage opens a dh-ietf1024-sha256-aes128-cbc-pkcs7 session.
        let encrypted = try s.python("""
            import secretstorage
            from secretstorage.util import open_session
            connection = secretstorage.dbus_init()
            # secretstorage falls back to plain on NotSupported: the session must really be DH.
            assert open_session(connection).encrypted, 'secretstorage fell back to a plain session'
            collection = secretstorage.get_default_collection(connection)
            assert collection.is_locked() is False
            item = collection.create_item('Encrypted one', {'app': 'ss', 'kind': 'dh'}, b'\\x00binary\\xffsecret', replace=True)
            again = collection.create_item('Encrypted one', {'app': 'ss', 'kind': 'dh'}, b'replaced', replace=True)
            assert again.item_path == item.item_path, (again.item_path, item.item_path)
            found = list(collection.search_items({'kind': 'dh'}))
            assert len(found) == 1
            print(found[0].get_secret().decode(), found[0].get_label(), sorted(found[0].get_attributes().items()))
            """)
        #expect(encrypted.status == 0, "\(encrypted.stderr)")
        #expect(encrypted.stdoutText.contains("replaced Encrypted one [('app', 'ss'), ('kind', 'dh')]"), "\(encrypted.stdoutText)")
        #expect(readFile(s.path("login/Encrypted one")) == Array("replaced".utf8))

        // plain, by hand: the secret crosses the bus as it is.
        let plain = try s.python("""
            session = plain_session()
            collection = iface(default_collection(), 'org.freedesktop.Secret.Collection')
            item, prompt = collection.CreateItem(props('Plain one', {'kind': 'plain'}), secret(session, b'clear text'), False)
            assert prompt == '/'
            got = iface(item, 'org.freedesktop.Secret.Item').GetSecret(session)
            print(bytes(got[2]).decode(), got[3])
            """)
        #expect(plain.status == 0, "\(plain.stderr)")
        #expect(plain.stdoutText == "clear text text/plain\n")
        #expect(try s.cli.cli(["get", "login/Plain one"]).stdoutText == "clear text")
    }

    @Test func aProgramTheRulesRefuseGetsNoSecretOverDBus() throws {
        let s = try SecretServiceFixture()
        #expect(try s.secretTool(["store", "--label=token", "app", "x"], stdin: "top secret").status == 0)
        // Only cat may read login/: secret-tool and python are refused, over D-Bus as on the mount.
        let allowed = try s.cli.cli(["allow", "login", "--exe", "/usr/bin/cat"])
        #expect(allowed.exitStatus == .success, "\(allowed.stderr)")
        #expect(eventually(within: 2) { (try? s.secretTool(["lookup", "app", "x"]).stdoutText) == "" })
        let refused = try s.python("""
            session = plain_session()
            items = service.SearchItems({'app': 'x'})
            print(len(items[0]) + len(items[1]))
            all_items = prop(default_collection(), 'org.freedesktop.Secret.Collection', 'Items')
            print(error(lambda: iface(all_items[0], 'org.freedesktop.Secret.Item').GetSecret(session)))
            print(len(service.GetSecrets(dbus.Array(all_items, signature='o'), session)))
            """)
        #expect(refused.stdoutText == "0\norg.freedesktop.DBus.Error.AccessDenied\n0\n", "\(refused.stdoutText) \(refused.stderr)")
        #expect(try run("/usr/bin/cat", [s.path("login/token")]).stdoutText == "top secret")
        // The mount's log commits once a second.
        #expect(eventually(within: 3) { (try? s.cli.cli(["log", "--denied", "--json"]).stdoutText.contains("denied")) == true })
    }

    @Test func lockAndUnlockAreOneStateForTheMountAndDBus() throws {
        let s = try SecretServiceFixture()
        #expect(try s.secretTool(["store", "--label=pin", "bank", "b"], stdin: "1234").status == 0)
        #expect(try run(keychainfsBinary, ["lock", s.mountpoint]).exitStatus == .success)
        // Seen at once over D-Bus, and the unlock prompt runs --extpass.
        let unlocked = try s.python("""
            import secretstorage
            connection = secretstorage.dbus_init()
            collection = secretstorage.get_default_collection(connection)
            print(collection.is_locked())
            item_path = prop(default_collection(), 'org.freedesktop.Secret.Collection', 'Items')[0]
            print(error(lambda: iface(item_path, 'org.freedesktop.Secret.Item').GetSecret(plain_session())))
            print(collection.unlock())
            print(collection.is_locked())
            """)
        #expect(unlocked.stdoutText == "True\norg.freedesktop.Secret.Error.IsLocked\nFalse\nFalse\n", "\(unlocked.stdoutText) \(unlocked.stderr)")
        #expect(readFile(s.path("login/pin")) == Array("1234".utf8))
        // secret-tool on a locked vault: its search finds the item as locked, it asks to
        // unlock, the prompt runs --extpass, and it reads the secret.
        #expect(try run(keychainfsBinary, ["lock", s.mountpoint]).exitStatus == .success)
        let looked = try s.secretTool(["lookup", "bank", "b"])
        #expect(looked.stdoutText == "1234", "\(looked.stderr)")
        #expect(readFile(s.path("login/pin")) == Array("1234".utf8))
        // Lock over D-Bus locks the mount.
        let locked = try s.python("print(service.Lock([default_collection()])[1])")
        #expect(locked.stdoutText == "/\n")
        #expect(errnoOf { open(s.path("login/pin"), O_RDONLY) } == EACCES)
        let status = try run(keychainfsBinary, ["status", s.mountpoint, "--json"])
        #expect(status.stdoutText.contains("\"locked\":true") || status.stdoutText.contains("\"locked\" : true"), "\(status.stdoutText)")
    }

    @Test func badInputGetsTheSpecsErrorsAndStoresNothing() throws {
        let s = try SecretServiceFixture()
        let result = try s.python("""
            session = plain_session()
            collection = iface(default_collection(), 'org.freedesktop.Secret.Collection')
            results = []
            # wrong types: a string where the secret struct goes
            results.append(error(lambda: obj(default_collection()).CreateItem(props('x', {}), 'not a secret', False,
                dbus_interface='org.freedesktop.Secret.Collection', signature='a{sv}sb')))
            # unknown object paths
            results.append(error(lambda: iface(ROOT + '/collection/999999', 'org.freedesktop.Secret.Collection').Delete()))
            results.append(error(lambda: iface(ROOT + '/nonsense', 'org.freedesktop.Secret.Item').Delete()))
            # another client's session, then a closed one
            other = os.popen("/usr/bin/python3 -c \\"import dbus; b=dbus.SessionBus(); s=dbus.Interface(b.get_object('org.freedesktop.secrets','/org/freedesktop/secrets',introspect=False),'org.freedesktop.Secret.Service'); print(s.OpenSession('plain', dbus.String('', variant_level=1))[1])\\"").read().strip()
            results.append(error(lambda: collection.CreateItem(props('x', {}), secret(other, b'v'), False)))
            closed = plain_session()
            iface(closed, 'org.freedesktop.Secret.Session').Close()
            results.append(error(lambda: collection.CreateItem(props('x', {}), secret(closed, b'v'), False)))
            # an oversized secret, an empty attribute name, an unsupported algorithm
            results.append(error(lambda: collection.CreateItem(props('big', {}), secret(session, b'x' * (2 << 20)), False)))
            results.append(error(lambda: collection.CreateItem(props('bad', {'': 'v'}), secret(session, b'v'), False)))
            results.append(error(lambda: service.OpenSession('rot13', dbus.String('', variant_level=1))))
            results.append(error(lambda: service.OpenSession('dh-ietf1024-sha256-aes128-cbc-pkcs7', dbus.ByteArray(b'\\x01', variant_level=1))))
            # a client that opens sessions in a loop runs out; the service does not
            opened = [plain_session() for _ in range(63)]
            results.append(error(plain_session))
            print(' '.join(results))
            print(len(prop(default_collection(), 'org.freedesktop.Secret.Collection', 'Items')))
            """)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutText == """
            org.freedesktop.DBus.Error.InvalidArgs org.freedesktop.Secret.Error.NoSuchObject org.freedesktop.DBus.Error.UnknownObject \
            org.freedesktop.Secret.Error.NoSession org.freedesktop.Secret.Error.NoSession org.freedesktop.DBus.Error.LimitsExceeded \
            org.freedesktop.DBus.Error.InvalidArgs org.freedesktop.DBus.Error.NotSupported org.freedesktop.DBus.Error.InvalidArgs \
            org.freedesktop.DBus.Error.LimitsExceeded
            0

            """, "\(result.stdoutText)")
        #expect(listing(s.path("login")).isEmpty)
        // The service is still up.
        #expect(try s.secretTool(["store", "--label=after", "still", "up"], stdin: "yes").status == 0)
    }

    @Test func aClientThatVanishesMidPromptLeavesTheServiceUpAndTheVaultLocked() throws {
        let gate = NSTemporaryDirectory() + "kfs-prompt-" + UUID().uuidString
        defer { for suffix in ["", ".asked", ".done"] { unlink(gate + suffix) } }
        // The mount's --extpass answers at once; the prompt's waits for `gate`, then says it is done.
        let s = try SecretServiceFixture { passphraseFile in
            "if [ -e '\(gate).asked' ]; then while [ ! -e '\(gate)' ]; do sleep 0.05; done; else touch '\(gate).asked'; fi; "
                + "cat '\(passphraseFile)'; [ -e '\(gate)' ] && touch '\(gate).done'; true"
        }
        #expect(try run(keychainfsBinary, ["lock", s.mountpoint]).exitStatus == .success)
        let vanished = try s.python("""
            prompt = service.Unlock([default_collection()])[1]
            iface(prompt, 'org.freedesktop.Secret.Prompt').Prompt('')
            os._exit(0)
            """)
        #expect(vanished.status == 0, "\(vanished.stderr)")
        FileManager.default.createFile(atPath: gate, contents: nil)
        #expect(eventually(within: 5) { FileManager.default.fileExists(atPath: gate + ".done") })
        // Its answer is thrown away: the vault stays locked, and the service answers others.
        let unlockedMeanwhile = eventually(within: 1) {
            (try? run(keychainfsBinary, ["status", s.mountpoint]).stdoutText.contains("unlocked")) == true
        }
        #expect(!unlockedMeanwhile)
        let after = try s.python("print(bool(prop(default_collection(), 'org.freedesktop.Secret.Collection', 'Locked')))")
        #expect(after.stdoutText == "True\n", "\(after.stdoutText) \(after.stderr)")
        // Dismiss: Completed says so, and the vault stays locked.
        let dismissed = try s.python("""
            from jeepney import MatchRule
            from jeepney.io.blocking import open_dbus_connection, Proxy
            from jeepney.bus_messages import message_bus
            conn = open_dbus_connection(bus='SESSION')
            rule = MatchRule(type='signal', interface='org.freedesktop.Secret.Prompt', member='Completed')
            Proxy(message_bus, conn).AddMatch(rule)
            with conn.filter(rule) as queue:
                prompt = service.Unlock([default_collection()])[1]
                iface(prompt, 'org.freedesktop.Secret.Prompt').Dismiss()
                message = conn.recv_until_filtered(queue, timeout=2.0)
                print(message.header.fields[1] == prompt, message.body[0], message.body[1])
            print(bool(prop(default_collection(), 'org.freedesktop.Secret.Collection', 'Locked')))
            """)
        #expect(dismissed.stdoutText == "True True ('ao', [])\nTrue\n", "\(dismissed.stdoutText) \(dismissed.stderr)")
    }

    @Test func theNameIsOneOwnersAndReplaceTakesIt() throws {
        let s = try SecretServiceFixture()
        let other = try CLIFixture()
        let second = try run(keychainfsBinary, ["secret-service", "--vault", other.vault, "--passphrase-file", other.passphraseFile],
                             environment: s.bus.environment)
        #expect(second.exitStatus == .serviceUnavailable)
        #expect(second.stderr.contains("org.freedesktop.secrets is already owned by pid"), "\(second.stderr)")
        // One line says why (a machine without Yama also gets the ptrace warning).
        #expect(second.stderr.split(separator: "\n").filter { !$0.contains("ptrace") }.count == 1, "\(second.stderr)")
        // --replace takes the name; the mount's service logs that it lost it and the mount goes on.
        let replacing = try startProcess(keychainfsBinary, ["secret-service", "--replace", "--vault", other.vault,
                                                            "--passphrase-file", other.passphraseFile], environment: s.bus.environment)
        defer { replacing.terminate() }
        let owner = { () -> String in
            (try? s.python("print(bus.get_name_owner(NAME)); print(bus.call_blocking('org.freedesktop.DBus', '/org/freedesktop/DBus', 'org.freedesktop.DBus', 'GetConnectionUnixProcessID', 's', (NAME,)))").stdoutText) ?? ""
        }
        #expect(eventually(within: 5) { owner().hasSuffix("\(replacing.processIdentifier)\n") }, "\(owner())")
        #expect(isMounted(s.mountpoint))
        replacing.terminate()
        replacing.waitUntilExit()
        #expect(replacing.terminationStatus == 0)
    }

    @Test func itemsKeepTheirAccessibilityClassWhileLocked() throws {
        let s = try SecretServiceFixture()
        #expect(try s.secretTool(["store", "--label=wifi", "net", "home"], stdin: "afu-secret").status == 0)
        #expect(try s.secretTool(["store", "--label=bank", "net", "bank"], stdin: "wu-secret").status == 0)
        #expect(try s.cli.cli(["class", "login/wifi", "after-first-unlock"]).exitStatus == .success)
        #expect(try run(keychainfsBinary, ["lock", s.mountpoint]).exitStatus == .success)
        let locked = try s.python("""
            session = plain_session()
            found = service.SearchItems({'net': 'home'})
            print(len(found[0]), len(found[1]))
            items = prop(default_collection(), 'org.freedesktop.Secret.Collection', 'Items')
            for path in items:
                item = iface(path, 'org.freedesktop.Secret.Item')
                locked = bool(prop(path, 'org.freedesktop.Secret.Item', 'Locked'))
                print(locked, bytes(item.GetSecret(session)[2]).decode() if not locked else error(lambda: item.GetSecret(session)))
            """)
        #expect(locked.status == 0, "\(locked.stderr)")
        // Found while locked (the search tags' key outlives a lock), and reported unlocked:
        // the after-first-unlock item is read; the other stays locked.
        #expect(locked.stdoutText.hasPrefix("1 0\n"), "\(locked.stdoutText)")
        #expect(locked.stdoutText.contains("False afu-secret\n"))
        #expect(locked.stdoutText.contains("True org.freedesktop.Secret.Error.IsLocked\n"))
    }

    @Test func collectionsAliasesAndPropertiesAreDictionariesAndAttributes() throws {
        let s = try SecretServiceFixture()
        let made = try s.python("""
            from jeepney import MatchRule
            from jeepney.io.blocking import open_dbus_connection, Proxy
            from jeepney.bus_messages import message_bus
            conn = open_dbus_connection(bus='SESSION')
            rule = MatchRule(type='signal', interface='org.freedesktop.Secret.Service')
            Proxy(message_bus, conn).AddMatch(rule)
            with conn.filter(rule) as queue:
                label = dbus.Dictionary({'org.freedesktop.Secret.Collection.Label': dbus.String('Work stuff', variant_level=1)}, signature='sv')
                path, prompt = service.CreateCollection(label, 'work')
                print(prompt, service.ReadAlias('work') == path, prop(path, 'org.freedesktop.Secret.Collection', 'Label'))
                seen = []
                while 'CollectionCreated' not in seen:
                    seen.append(conn.recv_until_filtered(queue, timeout=2.0).header.fields[3])
                print('created signal')
                collection = iface(path, 'org.freedesktop.Secret.Collection')
                item, _ = collection.CreateItem(props('Laptop', {'host': 'lap'}), secret(plain_session(), b'pw1'), False)
                properties = dbus.Interface(obj(item), 'org.freedesktop.DBus.Properties')
                properties.Set('org.freedesktop.Secret.Item', 'Label', dbus.String('Laptop login', variant_level=1))
                properties.Set('org.freedesktop.Secret.Item', 'Attributes', dbus.Dictionary({'host': 'lap', 'user': 'bo'}, signature='ss', variant_level=1))
                print(error(lambda: properties.Set('org.freedesktop.Secret.Item', 'Created', dbus.UInt64(1, variant_level=1))))
                print(sorted(service.GetSecrets(dbus.Array([item], signature='o'), plain_session()).keys()) == [item])
                service.SetAlias('default', path)
                print(service.ReadAlias('default') == path)
            """)
        #expect(made.status == 0, "\(made.stderr)")
        #expect(made.stdoutText == "/ True Work stuff\ncreated signal\norg.freedesktop.DBus.Error.PropertyReadOnly\nTrue\nTrue\n", "\(made.stdoutText)")
        // The collection is a dictionary named from its label; the item a file in it.
        let file = s.path("Work stuff/Laptop")
        #expect(readFile(file) == Array("pw1".utf8))
        #expect(try sh("getfattr --only-values -n keychainfs.label '\(file)'").stdoutText == "Laptop login")
        #expect(try sh("getfattr --only-values -n user.user '\(file)'").stdoutText == "bo")
        // secret-tool now stores into the new default.
        #expect(try s.secretTool(["store", "--label=next", "k", "v"], stdin: "x").status == 0)
        #expect(FileManager.default.fileExists(atPath: s.path("Work stuff/next")))
        // Deleting the collection removes the dictionary and everything in it.
        let deleted = try s.python("""
            path = service.ReadAlias('work')
            print(iface(path, 'org.freedesktop.Secret.Collection').Delete())
            print(service.ReadAlias('work'))
            """)
        #expect(deleted.stdoutText == "/\n/\n", "\(deleted.stdoutText) \(deleted.stderr)")
        #expect(!FileManager.default.fileExists(atPath: s.path("Work stuff")))
    }

    @Test func theServiceWithoutAMountStoresIntoTheSameVault() throws {
        let bus = try PrivateSessionBus()
        defer { bus.stop() }
        let f = try CLIFixture()
        let service = try startProcess(keychainfsBinary, ["secret-service", "--vault", f.vault, "--passphrase-file", f.passphraseFile],
                                       environment: bus.environment)
        defer { if service.isRunning { service.terminate() } }
        let store = { () throws -> RunResult in
            try run("/usr/bin/secret-tool", ["store", "--label=alone", "svc", "standalone"], stdin: Data("s3cret".utf8),
                    environment: bus.environment)
        }
        // Ready once it owns the name: until then the bus has no one to start it.
        #expect(eventually(within: 10) { (try? store().status) == 0 })
        #expect(try run("/usr/bin/secret-tool", ["lookup", "svc", "standalone"], environment: bus.environment).stdoutText == "s3cret")
        service.terminate()
        service.waitUntilExit()
        #expect(service.terminationStatus == 0)
        #expect(try f.cli(["get", "login/alone"]).stdoutText == "s3cret")
    }

    @Test func aConfirmRuleAsksOverDBusWhileTheBusGoesOnServing() throws {
        let dialog = try ScriptedConfirmation()
        let answers = dialog.directory, script = dialog.command
        let s = try SecretServiceFixture(mountArguments: ["--confirm-with", script, "--confirm-remember", "1s", "--confirm-timeout", "2"])
        #expect(try s.secretTool(["store", "--label=token", "app", "c"], stdin: "confirmed").status == 0)
        let python = try sh("readlink -f /usr/bin/python3").stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try s.cli.cli(["allow", "login", "--exe", python, "--confirm"]).exitStatus == .success)
        let get = """
            item = prop(default_collection(), 'org.freedesktop.Secret.Collection', 'Items')[0]
            session = plain_session()
            try:
                print(bytes(iface(item, 'org.freedesktop.Secret.Item').GetSecret(session)[2]).decode())
            except dbus.exceptions.DBusException as e:
                print(e.get_dbus_name())
            """
        // Refused until the rule applies (within a second), then by the dialog's answer.
        try "deny".write(toFile: answers + "/answer", atomically: true, encoding: .utf8)
        #expect(eventually(within: 3) { (try? s.python(get).stdoutText) == "org.freedesktop.DBus.Error.AccessDenied\n" })
        try "allow".write(toFile: answers + "/answer", atomically: true, encoding: .utf8)
        // The no holds for the executable for the remember duration (1 s), then it is asked again.
        #expect(eventually(within: 3) { (try? s.python(get).stdoutText) == "confirmed\n" })
        let asked = (try? String(contentsOfFile: answers + "/asked", encoding: .utf8)) ?? ""
        #expect(asked.split(separator: "\n").count == 2 && asked.hasSuffix("read \(s.mountpoint)/login/token\n"), "\(asked)")

        // A dialog that never answers: the caller waits, others are served meanwhile, and the
        // caller is refused when the command is stopped.
        try "hang".write(toFile: answers + "/answer", atomically: true, encoding: .utf8)
        let outcome = answers + "/outcome"
        let waiting = try startProcess("/usr/bin/python3", ["-c", SecretServiceFixture.prelude + "sys.stdout = open('\(outcome)', 'w')\n" + get],
                                       environment: s.bus.environment)
        let askedThrice = eventually(within: 5) {
            ((try? String(contentsOfFile: answers + "/asked", encoding: .utf8)) ?? "").split(separator: "\n").count >= 3
        }
        #expect(askedThrice)
        let meanwhile = try s.python("print(service.ReadAlias('default') != '/')")
        #expect(meanwhile.stdoutText == "True\n", "\(meanwhile.stderr)")
        #expect(waiting.isRunning)
        waiting.waitUntilExit()
        #expect(waiting.terminationStatus == 0)
        #expect((try? String(contentsOfFile: outcome, encoding: .utf8)) == "org.freedesktop.DBus.Error.AccessDenied\n")
    }

    @Test func theShippedActivationFileStartsTheServiceOnDemand() throws {
        let f = try CLIFixture()
        let services = f.directory + "/services"
        try FileManager.default.createDirectory(atPath: services, withIntermediateDirectories: true)
        let shipped = try String(contentsOfFile: readmePath.replacingOccurrences(of: "README.md", with: "dist/org.freedesktop.secrets.service"),
                                 encoding: .utf8)
        // The shipped file, pointed at this build and this test's vault.
        let file = shipped.replacingOccurrences(
            of: "Exec=/usr/local/bin/keychainfs secret-service --extpass /usr/local/libexec/keychainfs-askpass",
            with: "Exec=\(keychainfsBinary) secret-service --vault \(f.vault) --extpass 'cat \(f.passphraseFile)'")
        #expect(file != shipped)
        try file.write(toFile: services + "/org.freedesktop.secrets.service", atomically: true, encoding: .utf8)
        let bus = try PrivateSessionBus(serviceDirectory: services)
        defer { bus.stop() }
        // Nothing runs until a client asks.
        let stored = try run("/usr/bin/secret-tool", ["store", "--label=activated", "on", "demand"], stdin: Data("yes".utf8),
                             environment: bus.environment)
        #expect(stored.status == 0, "\(stored.stderr)")
        let owner = try run("/usr/bin/python3", ["-c", """
            import dbus
            print(dbus.SessionBus().call_blocking('org.freedesktop.DBus', '/org/freedesktop/DBus', 'org.freedesktop.DBus',
                'GetConnectionUnixProcessID', 's', ('org.freedesktop.secrets',)))
            """], environment: bus.environment)
        let pid = pid_t(owner.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(pid > 0, "\(owner.stderr)")
        #expect(procText("/proc/\(pid)/cmdline").contains("secret-service"))
        // SIGTERM ends it, its claim on the vault with it.
        kill(pid, SIGTERM)
        #expect(eventually(within: 10) { kill(pid, 0) != 0 || procText("/proc/\(pid)/stat").contains(") Z ") })
        #expect(try f.cli(["get", "login/activated"]).stdoutText == "yes")
    }

    @Test func usingTheKeyringKeepsTheIdleLockAwayAndStoppingLetsItLock() throws {
        let s = try SecretServiceFixture(mountArguments: ["--idle-lock", "3s"])
        #expect(try s.secretTool(["store", "--label=t", "idle", "x"], stdin: "v").status == 0)
        // Five seconds of lookups, one every 0.3 s, none through the mount: still unlocked.
        let used = try s.python("""
            session = plain_session()
            item = service.SearchItems({'idle': 'x'})[0][0]
            end = time.monotonic() + 5
            while time.monotonic() < end:
                iface(item, 'org.freedesktop.Secret.Item').GetSecret(session)
                time.sleep(0.3)
            print(bool(prop(default_collection(), 'org.freedesktop.Secret.Collection', 'Locked')))
            """)
        #expect(used.stdoutText == "False\n", "\(used.stdoutText) \(used.stderr)")
        #expect(eventually(within: 8) { (try? run(keychainfsBinary, ["status", s.mountpoint]).stdoutText.contains("state:     locked")) == true })
    }
}

/// A process left running (a service): the caller terminates it.
func startProcess(_ executable: String, _ arguments: [String], environment: [String: String]) throws -> Process {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    return process
}
