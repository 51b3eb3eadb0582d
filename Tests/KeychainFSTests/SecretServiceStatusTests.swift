import Foundation
import Glibc
import Testing

/// `secret-service --status` in the three states a desktop switching keyrings meets (nobody,
/// KeychainFS, another provider), and D-Bus activation through the installed activation file.
@Suite(.serialized, .tags(.bus)) struct SecretServiceStatusTests {
    @Test func nobodyOwnsTheName() throws {
        let bus = try PrivateSessionBus()
        let status = try run(keychainfsBinary, ["secret-service", "--status"], environment: bus.environment)
        #expect(status.exitStatus == .notFound, "\(status.stderr)")
        #expect(status.stdoutText == "owner: nobody\nactivatable: no\n", "\(status.stdoutText)")
        let json = try run(keychainfsBinary, ["secret-service", "--status", "--json"], environment: bus.environment)
        #expect(json.exitStatus == .notFound)
        #expect(json.stdoutText == "{\"activatable\":false,\"ours\":false}\n", "\(json.stdoutText)")
    }

    @Test func anotherProviderOwnsTheName() throws {
        let bus = try PrivateSessionBus()
        let other = try startProcess("/usr/bin/python3", ["-c", """
            import dbus, time
            bus = dbus.SessionBus()
            bus.request_name('org.freedesktop.secrets')
            time.sleep(120)
            """], environment: bus.environment)
        // SIGKILL: python inherits the test thread's blocked signals and would sleep through a SIGTERM.
        defer { kill(other.processIdentifier, SIGKILL); other.waitUntilExit() }
        var status = try run(keychainfsBinary, ["secret-service", "--status"], environment: bus.environment)
        #expect(eventually(within: 10) {
            status = (try? run(keychainfsBinary, ["secret-service", "--status"], environment: bus.environment)) ?? status
            return status.exitStatus != .notFound
        })
        #expect(status.exitStatus == .serviceUnavailable, "\(status.stderr)")
        #expect(status.stdoutText.hasPrefix("owner: :1."), "\(status.stdoutText)")
        #expect(status.stdoutText.contains(", pid \(other.processIdentifier) (python3), /usr/bin/python3"), "\(status.stdoutText)")
        #expect(status.stdoutText.contains("\nours: no\n"), "\(status.stdoutText)")
    }

    @Test func keychainFSOwnsTheName() throws {
        let bus = try PrivateSessionBus()
        let cli = try CLIFixture()
        let service = try startProcess(keychainfsBinary, ["secret-service", "--vault", cli.vault, "--passphrase-file", cli.passphraseFile],
                                       environment: bus.environment)
        defer { service.terminate(); service.waitUntilExit() }
        var status = try run(keychainfsBinary, ["secret-service", "--status", "--json"], environment: bus.environment)
        #expect(eventually(within: 20) {
            status = (try? run(keychainfsBinary, ["secret-service", "--status", "--json"], environment: bus.environment)) ?? status
            return status.exitStatus == .success
        }, "\(status.stdoutText) \(status.stderr)")
        let reported = try JSONSerialization.jsonObject(with: status.stdout) as? [String: Any] ?? [:]
        #expect(reported["pid"] as? Int == Int(service.processIdentifier))
        #expect(reported["ours"] as? Bool == true)
        #expect(reported["vault"] as? String == cli.vault)
        #expect(reported["executable"] as? String == URL(fileURLWithPath: keychainfsBinary).resolvingSymlinksInPath().path)
    }

    /// The activation file scripts/setup installs, pointed at this build and a test vault: the
    /// first client's call starts the service, and the item lands in the vault.
    @Test func theActivationFileStartsTheServiceWhenNoProviderRuns() throws {
        let cli = try CLIFixture()
        let services = cli.directory + "/services"
        try FileManager.default.createDirectory(atPath: services, withIntermediateDirectories: true)
        let installed = try String(contentsOfFile: packageRoot + "/dist/org.freedesktop.secrets.service", encoding: .utf8)
        let exec = installed.split(separator: "\n").first { $0.hasPrefix("Exec=") }
        #expect(exec?.hasPrefix("Exec=/usr/local/bin/keychainfs secret-service ") == true, "\(exec ?? "")")
        let rewritten = installed.split(separator: "\n").map { line in
            line.hasPrefix("Exec=")
                ? "Exec=\"\(keychainfsBinary)\" secret-service --vault \"\(cli.vault)\" --passphrase-file \"\(cli.passphraseFile)\""
                : String(line)
        }.joined(separator: "\n") + "\n"
        try rewritten.write(toFile: services + "/org.freedesktop.secrets.service", atomically: true, encoding: .utf8)
        let bus = try PrivateSessionBus(serviceDirectory: services)

        let before = try run(keychainfsBinary, ["secret-service", "--status"], environment: bus.environment)
        #expect(before.exitStatus == .notFound)
        #expect(before.stdoutText.hasSuffix("activatable: yes (the bus starts the program its activation file names)\n"), "\(before.stdoutText)")

        let stored = try run("/usr/bin/secret-tool", ["store", "--label=Mail", "service", "imap"], stdin: Data("activated".utf8),
                             environment: bus.environment)
        #expect(stored.status == 0, "\(stored.stderr)")
        let status = try run(keychainfsBinary, ["secret-service", "--status", "--json"], environment: bus.environment)
        let reported = try JSONSerialization.jsonObject(with: status.stdout) as? [String: Any] ?? [:]
        defer {
            // The activated service is the bus daemon's child, not ours: stop it, and let the daemon reap it.
            if let pid = reported["pid"] as? Int, reported["ours"] as? Bool == true {
                kill(pid_t(pid), SIGTERM)
                #expect(eventually(within: 10) { kill(pid_t(pid), 0) != 0 })
            }
        }
        #expect(status.exitStatus == .success, "\(status.stdoutText) \(status.stderr)")
        #expect(reported["vault"] as? String == cli.vault)
        let lookup = try run("/usr/bin/secret-tool", ["lookup", "service", "imap"], environment: bus.environment)
        #expect(lookup.stdoutText == "activated")
        #expect(try cli.cli(["get", "login/Mail"]).stdoutText == "activated")
    }
}
