/// A client's transport session algorithm, as OpenSession names it.
enum TransportAlgorithm: Sendable {
    /// Secrets cross the bus as they are (the bus is local; the spec requires every service to offer it).
    case plain
    /// RFC 2409 group 2 Diffie-Hellman, HKDF-SHA256 to an AES-128 key, AES-CBC with PKCS#7 padding.
    case dhIETF1024SHA256AES128CBCPKCS7

    /// nil for a name the spec does not define, which OpenSession answers with NotSupported.
    init?(name: String) {
        switch name {
        case "plain": self = .plain
        case "dh-ietf1024-sha256-aes128-cbc-pkcs7": self = .dhIETF1024SHA256AES128CBCPKCS7
        default: return nil
        }
    }
}
