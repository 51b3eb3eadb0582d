import CCrypto

/// Typed failures with a message fit for a D-Bus InvalidArgs reply (never quoting secret bytes).
enum TransportError: Error, Equatable, Sendable {
    case unsupportedAlgorithm(String)
    case invalidPublicKey(String)
    case invalidParameters(String)
    case badPadding
    case cryptoFailure(String)
    case secureMemory(String)

    var message: String {
        switch self {
        case .unsupportedAlgorithm(let name): "unsupported transport algorithm \(name)"
        case .invalidPublicKey(let why): "invalid Diffie-Hellman public key: \(why)"
        case .invalidParameters(let why): "invalid encrypted secret: \(why)"
        case .badPadding: "invalid encrypted secret: the padding does not check out (wrong key or damaged data)"
        case .cryptoFailure(let why): "encryption failure: \(why)"
        case .secureMemory(let why): "no locked memory for the secret: \(why)"
        }
    }

    /// A failure of the OpenSSL call `call`, with the library's reason for it. OpenSSL keeps
    /// its errors in a per-thread queue; it is emptied here so a stale entry never explains
    /// a later, unrelated failure.
    static func openSSL(_ call: String) -> TransportError {
        let code = ERR_get_error()
        ERR_clear_error()
        guard code != 0 else { return .cryptoFailure("\(call) failed") }
        var text = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &text, text.count)
        return .cryptoFailure("\(call) failed: \(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))")
    }
}
