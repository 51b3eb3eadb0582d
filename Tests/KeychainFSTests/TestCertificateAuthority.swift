import Foundation

/// A certificate authority of a test's own, made with the `openssl` command: its certificate,
/// and a server certificate and key it signed for `localhost`.
struct TestCertificateAuthority {
    let certificate: String
    let serverCertificate: String
    let serverKey: String

    init(in directory: String, name: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let base = directory + "/" + name
        certificate = base + "-ca.crt"
        serverCertificate = base + "-server.crt"
        serverKey = base + "-server.key"
        let extensions = base + "-server.ext"
        try "subjectAltName=DNS:localhost\n".write(toFile: extensions, atomically: false, encoding: .utf8)
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try TestCertificateAuthority.openssl(["req", "-x509"] + key + ["-keyout", base + "-ca.key", "-out", certificate,
                                                                       "-days", "2", "-subj", "/CN=\(name) test CA"])
        try TestCertificateAuthority.openssl(["req"] + key + ["-keyout", serverKey, "-out", base + "-server.csr", "-subj", "/CN=localhost"])
        try TestCertificateAuthority.openssl(["x509", "-req", "-in", base + "-server.csr", "-CA", certificate, "-CAkey", base + "-ca.key",
                                              "-CAcreateserial", "-out", serverCertificate, "-days", "2", "-extfile", extensions])
    }

    private static func openssl(_ arguments: [String]) throws {
        let result = try run("/usr/bin/openssl", arguments)
        guard result.status == 0 else { throw FixtureError("openssl \(arguments[0]) failed: \(result.stderr)") }
    }
}
