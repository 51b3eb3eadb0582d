import Daemon
import CSodium
import Glibc
import Support
import SystemCalls
import SystemPackage
import VaultCore

/// Writes an archive (see `ArchiveHeader`, `ArchiveRecord`) to a new file, one encrypted
/// message per entry; `finish` adds the end record tagged FINAL, which is what tells a reader
/// that nothing was cut off.
struct ArchiveWriter: ~Copyable {
    private let fd: Int32
    private let path: String
    private var state: SecureBuffer
    private var plaintext: SecureBuffer
    /// The header until the first message is written with it.
    private var associated: [UInt8] = []
    private var count = 0
    private var finished = false

    /// Creates `path` (mode 0600; an existing file is an error, never overwritten).
    init(creating path: String, passphrase: borrowing SecureBuffer, parameters: KDFParameters) throws(VaultError) {
        Sodium.ensureInitialized()
        var salt = [UInt8](repeating: 0, count: ArchiveHeader.saltBytes)
        randombytes_buf(&salt, salt.count)
        var header = ArchiveHeader(parameters: parameters, salt: salt,
                                   streamHeader: [UInt8](repeating: 0, count: ArchiveHeader.streamHeaderBytes))
        let key = try header.key(passphrase: passphrase)
        var state = try ArchiveHeader.streamState()
        var streamHeader = header.streamHeader
        key.withUnsafeBytes { key in
            state.withUnsafeMutableStorage { storage in
                _ = crypto_secretstream_xchacha20poly1305_init_push(storage.baseAddress!.assumingMemoryBound(to: crypto_secretstream_xchacha20poly1305_state.self), &streamHeader,
                                                                    key.baseAddress!.assumingMemoryBound(to: UInt8.self))
                return storage.count
            }
        }
        header.streamHeader = streamHeader
        let plaintext = try SecureBuffer(capacity: 4096)
        let fd: Int32
        do {
            fd = try SystemCall.retrying { open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600) }
        } catch {
            throw .invalidArgument("cannot create \(path): \(error)")
        }
        self.fd = fd
        self.path = path
        self.state = state
        self.plaintext = plaintext
        // Written with the first message, which carries it as associated data.
        associated = header.bytes
    }

    deinit {
        close(fd)
        if !finished { unlink(path) }
    }

    mutating func append(_ entry: PortableEntry) throws(VaultError) {
        try ArchiveRecord.encode(entry, into: &plaintext)
        try seal(tag: UInt8(crypto_secretstream_xchacha20poly1305_tag_message()))
        count += 1
    }

    /// Writes the end record and makes the file durable.
    mutating func finish() throws(VaultError) {
        try ArchiveRecord.encodeEnd(count: count, into: &plaintext)
        try seal(tag: UInt8(crypto_secretstream_xchacha20poly1305_tag_final()))
        do { try FileDescriptor(rawValue: fd).sync() } catch { throw failure(error) }
        finished = true
    }

    private mutating func seal(tag: UInt8) throws(VaultError) {
        let associated = self.associated
        var sealed = [UInt8](repeating: 0, count: 4 + plaintext.count + Int(crypto_secretstream_xchacha20poly1305_abytes()))
        let length = UInt32(sealed.count - 4)
        for index in 0..<4 { sealed[index] = UInt8(truncatingIfNeeded: length >> (8 * UInt32(index))) }
        plaintext.withUnsafeBytes { message in
            state.withUnsafeMutableStorage { storage in
                sealed.withUnsafeMutableBufferPointer { out in
                    _ = crypto_secretstream_xchacha20poly1305_push(
                        storage.baseAddress!.assumingMemoryBound(to: crypto_secretstream_xchacha20poly1305_state.self), out.baseAddress! + 4, nil,
                        message.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(message.count),
                        associated.isEmpty ? nil : associated, UInt64(associated.count), tag)
                }
                return storage.count
            }
        }
        plaintext.setCount(0)
        self.associated = []
        let file = FileDescriptor(rawValue: fd)
        do {
            try SystemCall.typed { try (associated + sealed).withUnsafeBytes { try file.writeFully($0) } }
        } catch {
            throw failure(error)
        }
    }

    private func failure(_ error: Errno) -> VaultError {
        error == .noSpace ? .diskFull : .storageFailure("cannot write \(path): \(error)")
    }
}
