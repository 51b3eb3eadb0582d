import Foundation
import Glibc
import Testing

/// The TPM PIN slot through the command line and the mount (issue 27 item 2), a software TPM
/// per test: sealed at `init --tpm-pin` or `tpm-pin add`, opened with the PIN or the passphrase,
/// a wrong PIN refused with status 2, removed and enrolled again.
@Suite(.tags(.tpm)) struct TPMPINSlotTests {
    @Test func initWithATPMPINOpensWithThePINAndWithThePassphrase() throws {
        let tpm = try SoftwareTPM()
        let m = try TPMMachine()
        let vault = m.f.directory + "/pin.vault"
        let pinFile = try m.f.write("4711\n", to: "pin")
        let env = m.environment(tpm.tcti)
        let made = try run(keychainfsBinary, ["init", "--vault", vault, "--passphrase-file", m.f.passphraseFile, "--tpm-pin",
                                               "--pin-file", pinFile, "--kdf", "interactive"], environment: env)
        #expect(made.exitStatus == .success, "\(made.stderr)")
        #expect(made.stderr.contains("with a TPM PIN slot"), "\(made.stderr)")
        #expect(try run(keychainfsBinary, ["set", "--vault", vault, "--pin-file", pinFile, "app/token", "by PIN"], environment: env).exitStatus == .success)
        let read = try run(keychainfsBinary, ["get", "--vault", vault, "--pin-file", pinFile, "app/token"], environment: env)
        #expect(read.exitStatus == .success && read.stdoutText == "by PIN", "\(read.stderr)")
        let recovered = try run(keychainfsBinary, ["get", "--vault", vault, "--passphrase-file", m.f.passphraseFile, "app/token"], environment: env)
        #expect(recovered.stdoutText == "by PIN", "\(recovered.stderr)")
        // Only the sealed object and the wrapped key reach the file, never the PIN.
        let bytes = try Data(contentsOf: URL(fileURLWithPath: vault))
        #expect(bytes.range(of: Data("4711".utf8)) == nil)
        let rows = try run("/usr/bin/sqlite3", [vault, "SELECT count(*), length(sealed_key) > 100, pcr_mask FROM pin_slots"])
        #expect(rows.stdoutText == "1|1|0\n", "\(rows.stdoutText)")
    }

    @Test func aWrongPINIsTheWrongPassphrasesStatusAndChangesNothing() throws {
        let p = try TPMPINMachine()
        #expect(try p.withPassphrase(["set", "app/token", "kept"]).exitStatus == .success)
        let refused = try p.withPIN(["get", "app/token"], pinFile: p.wrongPINFile)
        #expect(refused.exitStatus == .wrongPassphrase, "\(refused.status) \(refused.stderr)")
        #expect(refused.stderr.contains("wrong PIN") && refused.stdout.isEmpty, "\(refused.stderr)")
        let short = try p.withPIN(["get", "app/token"], pinFile: try p.m.f.write("12\n", to: "short"))
        #expect(short.exitStatus == .wrongPassphrase)
        let empty = try p.withPIN(["get", "app/token"], pinFile: try p.m.f.write("\n", to: "empty"))
        #expect(empty.exitStatus == .invalidInput && empty.stderr.contains("the PIN is empty"), "\(empty.stderr)")
        #expect(try p.withPIN(["get", "app/token"]).stdoutText == "kept")
    }

    /// One slot a vault: a second `add` is refused; `remove` takes it away (the passphrase
    /// stays), a PIN then says there is none (16), a second `remove` is status 4; `add` again works.
    @Test func tpmPINAddAndRemoveOnAnExistingVault() throws {
        let p = try TPMPINMachine()
        #expect(try p.withPassphrase(["set", "app/token", "t"]).exitStatus == .success)
        let again = try p.withPassphrase(["tpm-pin", "add", "--pin-file", p.pinFile, "--kdf", "interactive"])
        #expect(again.exitStatus == .alreadyExists, "\(again.stderr)")
        let removed = try p.withPassphrase(["tpm-pin", "remove"])
        #expect(removed.exitStatus == .success, "\(removed.stderr)")
        let none = try p.withPIN(["get", "app/token"])
        #expect(none.exitStatus == .pinSlotRefused && none.stderr.contains("has no TPM PIN slot"), "\(none.stderr)")
        #expect(try p.withPassphrase(["tpm-pin", "remove"]).exitStatus == .notFound)
        #expect(try p.withPassphrase(["get", "app/token"]).stdoutText == "t")
        #expect(try p.withPassphrase(["tpm-pin", "add", "--pin-file", p.pinFile, "--kdf", "interactive"]).exitStatus == .success)
        #expect(try p.withPIN(["get", "app/token"]).stdoutText == "t")
        // Opened with the PIN, the passphrase cannot be changed: passwd needs the passphrase itself.
        let passwd = try p.withPIN(["passwd", "--new-passphrase-file", p.pinFile])
        #expect(passwd.exitStatus == .invalidInput, "\(passwd.stderr)")
    }

    /// Bad input is refused with a clear error and changes nothing: PCRs that do not exist, a
    /// PIN too short, a PIN file that is not there, options that do not go together.
    @Test func badPINSlotInputIsRefusedAndChangesNothing() throws {
        let p = try TPMPINMachine()
        #expect(try p.withPassphrase(["tpm-pin", "remove"]).exitStatus == .success)
        let before = try Data(contentsOf: URL(fileURLWithPath: p.vault))
        let add = ["tpm-pin", "add", "--kdf", "interactive"]
        let short = try p.m.f.write("123\n", to: "short")
        let cases: [([String], Int32, String)] = [
            (add + ["--pin-file", p.pinFile, "--tpm-pcrs", "24"], 7, "PCR numbers from 0 to 23"),
            (add + ["--pin-file", p.pinFile, "--tpm-pcrs", "7,x"], 7, "PCR numbers from 0 to 23"),
            (add + ["--pin-file", short], 7, "at least 4 characters"),
            (add + ["--pin-file", p.m.f.directory + "/no-such-file"], 7, "cannot open PIN file"),
            (["init", "--pin-file", p.pinFile], 64, "go with --tpm-pin"),
            (["init", "--tpm-pin", "--pin"], 64, "--pin opens a vault"),
        ]
        for (arguments, status, message) in cases {
            let refused = try p.withPassphrase(arguments)
            #expect(refused.status == status, "\(arguments): \(refused.status) \(refused.stderr)")
            #expect(refused.stderr.contains(message), "\(arguments): \(refused.stderr)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: p.vault)) == before)
        #expect(try run("/usr/bin/sqlite3", [p.vault, "SELECT count(*) FROM pin_slots"]).stdoutText == "0\n")
    }

    /// A byte changed in the row's wrapped key: the right PIN then meets an integrity failure
    /// (status 3), never another key; the cost edited changes what the PIN derives, so the TPM
    /// sees another authorization (status 2, and it counts it). The passphrase still opens.
    @Test func aChangedPINSlotRowIsAnIntegrityFailure() throws {
        let p = try TPMPINMachine()
        #expect(try p.withPassphrase(["set", "app/token", "t"]).exitStatus == .success)
        let edits: [(String, Int32)] = [("UPDATE pin_slots SET wrapped_master_key = zeroblob(1) || substr(wrapped_master_key, 2)", 3),
                                        ("UPDATE pin_slots SET kdf_opslimit = kdf_opslimit + 1", 2)]
        for (edit, status) in edits {
            let backup = try Data(contentsOf: URL(fileURLWithPath: p.vault))
            #expect(try run("/usr/bin/sqlite3", [p.vault, edit]).status == 0)
            let refused = try p.withPIN(["get", "app/token"])
            #expect(refused.status == status && refused.stdout.isEmpty, "\(edit): \(refused.status) \(refused.stderr)")
            #expect(try p.withPassphrase(["get", "app/token"]).stdoutText == "t")
            try backup.write(to: URL(fileURLWithPath: p.vault))
        }
        #expect(try p.withPIN(["get", "app/token"]).stdoutText == "t")
    }

    /// A vault in PostgreSQL takes a PIN slot as a file does (layout 4's table).
    @Test(.tags(.postgres)) func aVaultInPostgreSQLOpensWithItsPIN() throws {
        let tpm = try SoftwareTPM()
        let m = try TPMMachine()
        let server = try PostgresServer()
        let uri = try server.createDatabase("pin")
        let pinFile = try m.f.write("4711\n", to: "pin")
        let env = m.environment(tpm.tcti)
        let made = try run(keychainfsBinary, ["init", "--vault", uri, "--passphrase-file", m.f.passphraseFile, "--tpm-pin", "--pin-file", pinFile,
                                               "--kdf", "interactive"], environment: env)
        #expect(made.exitStatus == .success, "\(made.stderr)")
        #expect(try run(keychainfsBinary, ["set", "--vault", uri, "--pin-file", pinFile, "app/token", "in pg"], environment: env).exitStatus == .success)
        #expect(try run(keychainfsBinary, ["get", "--vault", uri, "--passphrase-file", m.f.passphraseFile, "app/token"], environment: env).stdoutText == "in pg")
        #expect(try server.sql("pin", "SELECT count(*) FROM pin_slots") == "1\n")
        #expect(try run(keychainfsBinary, ["tpm-pin", "remove", "--vault", uri, "--pin-file", pinFile], environment: env).exitStatus == .success)
        #expect(try server.sql("pin", "SELECT count(*) FROM pin_slots") == "0\n")
    }

    /// Without a TPM, `init --tpm-pin` refuses before asking anything and makes no vault.
    @Test func withoutATPMInitRefusesAndMakesNoVault() throws {
        let m = try TPMMachine()
        let vault = m.f.directory + "/none.vault"
        let pinFile = try m.f.write("4711\n", to: "pin")
        let refused = try run(keychainfsBinary, ["init", "--vault", vault, "--passphrase-file", m.f.passphraseFile, "--tpm-pin",
                                                  "--pin-file", pinFile], environment: m.environment("none"))
        #expect(refused.exitStatus == .pinSlotRefused && refused.stderr.contains("has no TPM"), "\(refused.stderr)")
        #expect(access(vault, F_OK) != 0)
    }

    /// A vault with a PIN slot takes no member, and a vault with members takes no PIN slot.
    @Test func aVaultWithAPINSlotTakesNoMember() throws {
        let p = try TPMPINMachine()
        let keyFile = p.m.f.directory + "/member.key"
        let env = p.m.environment(p.tcti)
        #expect(try run(keychainfsBinary, ["member", "init", "--member-key", keyFile, "--passphrase-file", p.m.f.passphraseFile,
                                           "--kdf", "interactive"], environment: env).exitStatus == .success)
        let publicKey = try run(keychainfsBinary, ["member", "show", "--member-key", keyFile], environment: env).stdoutText
            .split(separator: "\n").last.map(String.init) ?? ""
        let added = try p.withPassphrase(["member", "add", publicKey, "--name", "bob"])
        #expect(added.exitStatus == .invalidInput && added.stderr.contains("TPM PIN slot"), "\(added.status) \(added.stderr)")
        // The other way round: the slot removed, the member added, the slot refused.
        #expect(try p.withPassphrase(["tpm-pin", "remove"]).exitStatus == .success)
        #expect(try p.withPassphrase(["member", "add", publicKey, "--name", "bob"]).exitStatus == .success)
        let pin = try p.withPassphrase(["tpm-pin", "add", "--pin-file", p.pinFile, "--kdf", "interactive"])
        #expect(pin.exitStatus == .invalidInput && pin.stderr.contains("a vault with members takes no TPM PIN slot"), "\(pin.status) \(pin.stderr)")
        #expect(try run("/usr/bin/sqlite3", [p.vault, "SELECT count(*) FROM pin_slots"]).stdoutText == "0\n")
    }

    /// `secret-service --pin-file FILE` serves the vault opened with its PIN; a wrong PIN ends it with status 2.
    @Test func theSecretServiceOpensWithThePINFile() throws {
        let p = try TPMPINMachine()
        let bus = try PrivateSessionBus()
        defer { bus.stop() }
        let environment = p.m.environment(p.tcti).merging(bus.environment) { $1 }
        let wrong = try run(keychainfsBinary, ["secret-service", "--vault", p.vault, "--pin-file", p.wrongPINFile], environment: environment)
        #expect(wrong.exitStatus == .wrongPassphrase && wrong.stderr.contains("wrong PIN"), "\(wrong.status) \(wrong.stderr)")
        let service = try startProcess(keychainfsBinary, ["secret-service", "--vault", p.vault, "--pin-file", p.pinFile], environment: environment)
        defer { if service.isRunning { service.terminate() } }
        let store = { () throws -> RunResult in
            try run("/usr/bin/secret-tool", ["store", "--label=pinned", "svc", "pin"], stdin: Data("s3cret".utf8), environment: bus.environment)
        }
        #expect(eventually(within: 20) { (try? store().status) == 0 })
        #expect(try run("/usr/bin/secret-tool", ["lookup", "svc", "pin"], environment: bus.environment).stdoutText == "s3cret")
        service.terminate()
        service.waitUntilExit()
        #expect(try p.withPIN(["get", "login/pinned"]).stdoutText == "s3cret")
    }

    /// The PIN is in no memory of the daemon once it mounted, nor after an unlock with it: it
    /// passed through locked memory only, wiped when the slot opened.
    @Test(.tags(.mount)) func thePINIsGoneRightAfterMountingAndUnlocking() throws {
        let p = try TPMPINMachine()
        let canary = "pin-canary-" + UUID().uuidString
        let canaryFile = try p.m.f.write(canary + "\n", to: "canary-pin")
        #expect(try p.withPassphrase(["tpm-pin", "remove"]).exitStatus == .success)
        #expect(try p.withPassphrase(["tpm-pin", "add", "--pin-file", canaryFile, "--kdf", "interactive"]).exitStatus == .success)
        let (mounted, mountpoint) = try p.mount(pinFile: canaryFile)
        defer { p.unmount(mountpoint) }
        try #require(mounted.exitStatus == .success, "\(mounted.stderr)")
        let pid = try status(mountpoint).pid
        // The scanner works on this process: the vault's path (a plain string) is found.
        #expect(processMemoryContains(pid, Array(p.vault.utf8)))
        #expect(!processMemoryContains(pid, Array(canary.utf8)), "the PIN found in the daemon's memory")
        let env = p.m.environment(p.tcti)
        #expect(try run(keychainfsBinary, ["lock", mountpoint], environment: env).exitStatus == .success)
        #expect(try run(keychainfsBinary, ["unlock", "--pin-file", canaryFile, mountpoint], environment: env).exitStatus == .success)
        #expect(!processMemoryContains(pid, Array(canary.utf8)), "the PIN found in the daemon's memory after an unlock")
    }

    /// Through a mount: `-o pinfile=FILE` opens it; locked, `unlock --pin-file` with a wrong PIN
    /// leaves it locked (status 2), with the PIN unlocks it, and so does the passphrase.
    @Test(.tags(.mount)) func aMountOpensWithThePINAndUnlocksWithIt() throws {
        let p = try TPMPINMachine()
        #expect(try p.withPassphrase(["set", "app/token", "mounted"]).exitStatus == .success)
        let (mounted, mountpoint) = try p.mount(pinFile: p.pinFile)
        defer { p.unmount(mountpoint) }
        try #require(mounted.exitStatus == .success, "\(mounted.status) \(mounted.stderr)")
        #expect(readFile(mountpoint + "/app/token") == Array("mounted".utf8))
        let env = p.m.environment(p.tcti)
        #expect(try run(keychainfsBinary, ["lock", mountpoint], environment: env).exitStatus == .success)
        #expect(errnoOf { open(mountpoint + "/app/token", O_RDONLY) } == EACCES)
        let wrong = try run(keychainfsBinary, ["unlock", "--pin-file", p.wrongPINFile, mountpoint], environment: env)
        #expect(wrong.exitStatus == .wrongPassphrase && wrong.stderr.contains("wrong PIN"), "\(wrong.status) \(wrong.stderr)")
        #expect(errnoOf { open(mountpoint + "/app/token", O_RDONLY) } == EACCES)
        let unlocked = try run(keychainfsBinary, ["unlock", "--pin-file", p.pinFile, mountpoint], environment: env)
        #expect(unlocked.exitStatus == .success, "\(unlocked.stderr)")
        #expect(readFile(mountpoint + "/app/token") == Array("mounted".utf8))
        #expect(try run(keychainfsBinary, ["lock", mountpoint], environment: env).exitStatus == .success)
        let byPassphrase = try run(keychainfsBinary, ["unlock", "--passphrase-file", p.m.f.passphraseFile, mountpoint], environment: env)
        #expect(byPassphrase.exitStatus == .success, "\(byPassphrase.stderr)")
        #expect(readFile(mountpoint + "/app/token") == Array("mounted".utf8))
    }
}
