import Foundation
import Testing

/// TLS to a server on another machine: libpq verifies the certificate and the host name.
@Suite(.serialized, .tags(.mount, .postgres, .slow)) struct PostgresTLSTests {
    @Test func aVaultOpensOverVerifiedTLSAndAnotherAuthorityIsRefused() throws {
        let directory = NSTemporaryDirectory() + "kcfs-tls-" + UUID().uuidString.prefix(8)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let authority = try TestCertificateAuthority(in: directory, name: "team")
        let stranger = try TestCertificateAuthority(in: directory, name: "stranger")
        let server = try PostgresServer(.init(tcp: true, tls: (authority.serverCertificate, authority.serverKey)))
        _ = try server.createDatabase("tls")
        func uri(host: String = "localhost", authority: String) -> String {
            "postgresql://postgres:hunter2-canary@\(host):\(server.port)/tls?sslmode=verify-full&sslrootcert=\(authority)"
        }

        let vault = try CLIFixture(vault: uri(authority: authority.certificate))
        #expect(try vault.cli(["set", "over-tls", "sealed"]).exitStatus == .success)
        #expect(try vault.cli(["get", "over-tls"]).stdoutText == "sealed")
        let mountpoint = vault.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let daemon = try ForegroundDaemon(vault, mountpoint: mountpoint)
        #expect(readFile(mountpoint + "/over-tls") == Array("sealed".utf8))
        #expect(ItemWriter.writeItem(mountpoint + "/mounted", "through the mount") == nil)
        #expect(try vault.cli(["get", "mounted"]).stdoutText == "through the mount")
        withExtendedLifetime(daemon) {}
        // The server lets TCP in over TLS only, so these went over it.
        let plain = try run(keychainfsBinary, ["ls", "--vault", "postgresql://postgres@localhost:\(server.port)/tls?sslmode=disable",
                                               "--passphrase-file", vault.passphraseFile])
        #expect(plain.exitStatus == .storage, "\(plain.stderr)")

        for (other, reason) in [(uri(authority: stranger.certificate), "certificate verify failed"),
                                (uri(host: "127.0.0.1", authority: authority.certificate), "does not match host name")] {
            let refused = try run(keychainfsBinary, ["ls", "--vault", other, "--passphrase-file", vault.passphraseFile])
            #expect(refused.exitStatus == .storage, "\(refused.stderr)")
            #expect(refused.stderr.split(separator: "\n").count == 1, "\(refused.stderr)")
            #expect(refused.stderr.contains("cannot connect to PostgreSQL at "
                                            + other.replacingOccurrences(of: ":hunter2-canary@", with: "@") + "#default: "), "\(refused.stderr)")
            #expect(refused.stderr.contains(reason), "\(refused.stderr)")
            #expect(!refused.stderr.contains("hunter2"))
        }
    }
}
