import Foundation
@testable import Keyring
import Testing
import VaultCore

/// The other end of a transport session: Debian's python3-secretstorage, a Secret Service
/// client written independently of us, driven line by line over pipes. Its key pair and key
/// derivation are secretstorage's own (dhcrypto.Session); secrets for us are encoded by its
/// format_secret; secrets from us are decrypted as its Item.get_secret does, with
/// cryptography's AES-CBC, and unpadded strictly with cryptography's PKCS7.
private final class SecretStorageClient {
    /// `client-first`: the client's value comes first, as in OpenSession. `leading-zero`: ours
    /// comes first and the client draws exponents until the shared secret's top byte is zero,
    /// which only a secret padded to 128 bytes turns into the key the client derives.
    static let script = """
        import os, signal, sys
        signal.alarm(60)  # a wedged exchange ends in EOF, a failure, rather than a hung test
        from cryptography.hazmat.primitives import padding
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
        from secretstorage.dhcrypto import DH_PRIME_1024, Session, int_to_bytes
        from secretstorage.util import format_secret

        def reply(*words):
            print(*words, flush=True)

        def unhex(word):
            return b'' if word == '-' else bytes.fromhex(word)

        session = Session()
        session.object_path = '/org/freedesktop/secrets/session/test'
        if sys.argv[1] == 'client-first':
            reply(int_to_bytes(session.my_public_key).hex())
            server = int(sys.stdin.readline(), 16)
        else:
            server = int(sys.stdin.readline(), 16)
            while pow(server, session.my_private_key, DH_PRIME_1024) >> 1016 != 0:
                session.my_private_key = int.from_bytes(os.urandom(0x80), 'big')
            session.my_public_key = pow(2, session.my_private_key, DH_PRIME_1024)
            reply(int_to_bytes(session.my_public_key).hex())
        session.set_server_public_key(server)

        for line in sys.stdin:
            command, *words = line.split()
            if command == 'encrypt':
                _, iv, ciphertext, _ = format_secret(session, unhex(words[0]), 'text/plain')
                reply(iv.hex(), ciphertext.hex())
            elif command == 'decrypt':
                decryptor = Cipher(algorithms.AES(session.aes_key), modes.CBC(unhex(words[0]))).decryptor()
                padded = decryptor.update(unhex(words[1])) + decryptor.finalize()
                unpadder = padding.PKCS7(128).unpadder()
                reply((unpadder.update(padded) + unpadder.finalize()).hex() or '-')
        """

    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let errors = Pipe()
    private var buffered = Data()

    init(mode: String) throws {
        ignoreBrokenPipes
        // Debian's python, which has python3-secretstorage; a python3 earlier on PATH may not.
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", Self.script, mode]
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try process.run()
    }

    deinit {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }

    func send(_ words: String...) throws {
        try input.fileHandleForWriting.write(contentsOf: Data((words.joined(separator: " ") + "\n").utf8))
    }

    /// The client's next line, split into words; its stderr as the error if it ended instead.
    func receive() throws -> [String] {
        var searched = 0  // a mebibyte's line comes in many chunks; each is searched once
        while true {
            if let newline = buffered[(buffered.startIndex + searched)...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffered[..<newline], as: UTF8.self)
                buffered.removeSubrange(...newline)
                return line.split(separator: " ").map(String.init)
            }
            searched = buffered.count
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else {
                try? input.fileHandleForWriting.close()
                process.waitUntilExit()
                let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                throw FixtureError("secretstorage client ended: \(stderr)")
            }
            buffered.append(chunk)
        }
    }

    /// The client's encoding of `plaintext`: (IV, ciphertext).
    func encrypt(_ plaintext: [UInt8]) throws -> (iv: [UInt8], ciphertext: [UInt8]) {
        try send("encrypt", hex(plaintext))
        let words = try receive()
        return (unhex(words[0]), unhex(words[1]))
    }

    /// What the client reads from our IV and ciphertext.
    func decrypt(iv: [UInt8], ciphertext: [UInt8]) throws -> [UInt8] {
        try send("decrypt", hex(iv), hex(ciphertext))
        return unhex(try receive()[0])
    }
}

private let hexDigits = Array("0123456789abcdef".utf8)

/// Lower-case hex (as python prints it), "-" for nothing (so a line always has its words). By table: a mebibyte
/// through String(format:) would dominate the suite's time.
private func hex(_ bytes: [UInt8]) -> String {
    guard !bytes.isEmpty else { return "-" }
    var digits = [UInt8]()
    digits.reserveCapacity(bytes.count * 2)
    for byte in bytes {
        digits.append(hexDigits[Int(byte >> 4)])
        digits.append(hexDigits[Int(byte & 0x0F)])
    }
    return String(decoding: digits, as: UTF8.self)
}

private func unhex(_ text: String) -> [UInt8] {
    guard text != "-" else { return [] }
    func value(_ digit: UInt8) -> UInt8 { digit <= UInt8(ascii: "9") ? digit - UInt8(ascii: "0") : digit - UInt8(ascii: "a") + 10 }
    let digits = Array(text.utf8)
    precondition(digits.count % 2 == 0, "odd hex")
    return stride(from: 0, to: digits.count, by: 2).map { value(digits[$0]) << 4 | value(digits[$0 + 1]) }
}

/// Unpredictable bytes, eight per call of the system generator (a call per byte, a syscall
/// each, made a mebibyte slow).
private func randomBytes(_ count: Int) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    var bytes = [UInt8](repeating: 0, count: count)
    bytes.withUnsafeMutableBytes { raw in
        for offset in stride(from: 0, to: count, by: 8) {
            withUnsafeBytes(of: generator.next() as UInt64) { word in
                raw.baseAddress!.advanced(by: offset).copyMemory(from: word.baseAddress!, byteCount: min(8, count - offset))
            }
        }
    }
    return bytes
}

private func secure(_ bytes: [UInt8]) throws -> SecureBuffer {
    var buffer = try SecureBuffer(capacity: bytes.count)
    buffer.withUnsafeMutableStorage { storage in
        bytes.withUnsafeBytes { storage.copyMemory(from: $0) }
        return bytes.count
    }
    return buffer
}

private func contents(_ buffer: borrowing SecureBuffer) -> [UInt8] {
    buffer.withUnsafeBytes { Array($0) }
}

/// The RFC 2409 prime as secretstorage spells it, independent of the copy OpenSSL gives us.
private func oakleyPrime() throws -> [UInt8] {
    let printed = try run("/usr/bin/python3", ["-c", "from secretstorage.dhcrypto import DH_PRIME_1024; print(DH_PRIME_1024.to_bytes(128, 'big').hex())"])
    guard printed.status == 0 else { throw FixtureError("python3 failed: \(printed.stderr)") }
    return unhex(printed.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines))
}

/// Big-endian `value` plus `delta` (which keeps it non-negative and within its width).
private func adding(_ delta: Int, to value: [UInt8]) -> [UInt8] {
    var result = value
    var carry = delta
    for index in result.indices.reversed() where carry != 0 {
        let sum = Int(result[index]) + carry
        result[index] = UInt8(truncatingIfNeeded: sum)
        carry = sum >> 8
    }
    return result
}

@Suite struct TransportCipherTests {
    /// Empty, under a block, a block, over a block, and a large secret (a key file, say).
    static let sizes = [0, 15, 16, 17, 1 << 20]

    @Test func algorithmNames() {
        #expect(TransportAlgorithm(name: "plain") == .plain)
        // The spec's name, as libsecret, secretstorage and gnome-keyring spell it.
        #expect(TransportAlgorithm(name: "dh-ietf1024-sha256-aes128-cbc-pkcs7") == .dhIETF1024SHA256AES128CBCPKCS7)
        #expect(TransportAlgorithm(name: "dh-ietf1024-sha256_aes128-cbc-pkcs7") == nil)
        #expect(TransportAlgorithm(name: "PLAIN") == nil)
        #expect(TransportAlgorithm(name: "") == nil)
    }

    @Test func secretsCrossBothWaysWithSecretStorage() throws {
        let client = try SecretStorageClient(mode: "client-first")
        let clientPublicKey = unhex(try client.receive()[0])
        let agreement = try DHKeyAgreement()
        #expect(agreement.publicKey.count == 128)
        let key = try agreement.sessionKey(peerPublicKey: clientPublicKey)
        try client.send(hex(agreement.publicKey))

        for size in Self.sizes {
            let secret = randomBytes(size)
            let fromClient = try client.encrypt(secret)
            let received = try key.decrypt(iv: fromClient.iv, ciphertext: fromClient.ciphertext)
            #expect(received.count == size)
            #expect(contents(received) == secret, "client to service, \(size) bytes")

            let sent = try key.encrypt(try secure(secret))
            #expect(sent.iv.count == 16)
            #expect(sent.ciphertext.count == (size / 16 + 1) * 16)
            #expect(try client.decrypt(iv: sent.iv, ciphertext: sent.ciphertext) == secret, "service to client, \(size) bytes")
            #expect(contents(try key.decrypt(iv: sent.iv, ciphertext: sent.ciphertext)) == secret)
        }

        // A fresh IV each time, so equal secrets do not look equal on the bus.
        let same = try secure(Array("same secret".utf8))
        let first = try key.encrypt(same)
        let second = try key.encrypt(same)
        #expect(first.iv != second.iv)
        #expect(first.ciphertext != second.ciphertext)
    }

    @Test func sharedSecretWithALeadingZeroByteIsPaddedAsClientsPadIt() throws {
        let client = try SecretStorageClient(mode: "leading-zero")
        let agreement = try DHKeyAgreement()
        try client.send(hex(agreement.publicKey))
        let key = try agreement.sessionKey(peerPublicKey: unhex(try client.receive()[0]))

        let secret = Array("padded to the prime's 128 bytes".utf8)
        let fromClient = try client.encrypt(secret)
        #expect(contents(try key.decrypt(iv: fromClient.iv, ciphertext: fromClient.ciphertext)) == secret)
        let sent = try key.encrypt(try secure(secret))
        #expect(try client.decrypt(iv: sent.iv, ciphertext: sent.ciphertext) == secret)
    }

    @Test func publicValuesOutsideTheGroupAreRefused() throws {
        let p = try oakleyPrime()
        #expect(p.count == 128 && p.first == 0xFF && p.last == 0xFF)
        let agreement = try DHKeyAgreement()
        let refused: [(String, [UInt8])] = [
            ("empty", []), ("0", [0]), ("0 in 128 bytes", [UInt8](repeating: 0, count: 128)), ("1", [1]),
            ("1 in 128 bytes", [UInt8](repeating: 0, count: 127) + [1]),
            ("p-1", adding(-1, to: p)), ("p", p), ("p+1", adding(1, to: p)),
            ("2^1024-1", [UInt8](repeating: 0xFF, count: 128)),
        ]
        for (name, value) in refused {
            #expect(throws: TransportError.invalidPublicKey("the value is outside [2, p-2]"), "\(name)") {
                try agreement.sessionKey(peerPublicKey: value)
            }
        }
        #expect(throws: TransportError.invalidPublicKey("129 bytes, more than the group's 128"), "oversized") {
            try agreement.sessionKey(peerPublicKey: [0] + [UInt8](repeating: 0, count: 127) + [2])
        }
        // The edges of the range are values, however useless (the client chose them itself).
        _ = try agreement.sessionKey(peerPublicKey: [2])
        _ = try agreement.sessionKey(peerPublicKey: adding(-2, to: p))
    }

    @Test func malformedSecretsFromTheClientAreRefused() throws {
        let key = try DHKeyAgreement().sessionKey(peerPublicKey: try DHKeyAgreement().publicKey)
        let valid = try key.encrypt(try SecureBuffer(capacity: 0))
        #expect(valid.ciphertext.count == 16)

        for length in [0, 8, 15, 17, 32] {
            #expect(throws: TransportError.invalidParameters("the IV (parameters) is \(length) bytes, not 16")) {
                try key.decrypt(iv: [UInt8](repeating: 0, count: length), ciphertext: valid.ciphertext)
            }
        }
        for length in [0, 1, 15, 17, 33] {
            #expect(throws: TransportError.invalidParameters("the ciphertext is \(length) bytes, not a positive multiple of 16")) {
                try key.decrypt(iv: valid.iv, ciphertext: [UInt8](repeating: 0, count: length))
            }
        }

        // An empty secret decrypts to a block of sixteen 0x10 bytes; flipping IV bits flips
        // the same bits of it, which spoils the padding in each way it can be spoilt.
        for (index, flip) in [(15, UInt8(0x01)), (15, 0x10), (14, 0x01), (0, 0x01)] {
            var iv = valid.iv
            iv[index] ^= flip
            #expect(throws: TransportError.badPadding, "IV byte \(index) ^ \(flip)") {
                try key.decrypt(iv: iv, ciphertext: valid.ciphertext)
            }
        }
        // A failure leaves nothing queued in OpenSSL to confuse the next call.
        #expect(try key.decrypt(iv: valid.iv, ciphertext: valid.ciphertext).count == 0)
    }

    @Test func messagesNameTheProblemNotTheBytes() {
        #expect(TransportError.badPadding.message.contains("padding"))
        #expect(TransportError.invalidPublicKey("the value is outside [2, p-2]").message
                == "invalid Diffie-Hellman public key: the value is outside [2, p-2]")
        #expect(TransportError.unsupportedAlgorithm("rot13").message == "unsupported transport algorithm rot13")
    }
}
