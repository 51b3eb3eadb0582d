import Daemon
import CSodium
import Glibc
import SystemCalls
import SystemPackage
import VaultCore

/// Reads an archive back, message by message, each authenticated before it is parsed. A wrong
/// passphrase and a changed byte fail alike at the first message; a file cut short, or with
/// anything after the FINAL message, fails at its end.
struct ArchiveReader: ~Copyable {
    private let fd: Int32
    private var state: SecureBuffer
    private var associated: [UInt8]
    private var ended = false

    init(opening path: String, passphrase: borrowing SecureBuffer) throws(VaultError) {
        Sodium.ensureInitialized()
        let fd: Int32
        do {
            fd = try SystemCall.retrying { open(path, O_RDONLY | O_CLOEXEC) }
        } catch {
            throw .invalidArgument("cannot open \(path): \(error)")
        }
        var headerBytes = [UInt8](repeating: 0, count: ArchiveHeader.size)
        guard ArchiveReader.readExactly(fd, &headerBytes) else {
            close(fd)
            throw .invalidArgument("\(path): not a keychainfs archive")
        }
        let header: ArchiveHeader
        do { header = try ArchiveHeader(parsing: headerBytes) } catch {
            close(fd)
            throw error
        }
        var state: SecureBuffer
        do {
            let key = try header.key(passphrase: passphrase)
            state = try ArchiveHeader.streamState()
            let streamHeader = header.streamHeader
            key.withUnsafeBytes { key in
                state.withUnsafeMutableStorage { storage in
                    _ = crypto_secretstream_xchacha20poly1305_init_pull(storage.baseAddress!.assumingMemoryBound(to: crypto_secretstream_xchacha20poly1305_state.self), streamHeader,
                                                                        key.baseAddress!.assumingMemoryBound(to: UInt8.self))
                    return storage.count
                }
            }
        } catch {
            close(fd)
            throw error
        }
        self.fd = fd
        self.state = state
        associated = headerBytes
    }

    deinit { close(fd) }

    /// The next entry, or nil after the end record (whose count must match `seen`).
    mutating func next(seen: Int) throws(VaultError) -> PortableEntry? {
        guard !ended else { return nil }
        var lengthBytes = [UInt8](repeating: 0, count: 4)
        guard ArchiveReader.readExactly(fd, &lengthBytes) else { throw ArchiveRecord.malformed("it is cut short: no end record") }
        let length = Int(UInt32(littleEndian: lengthBytes.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }))
        let overhead = Int(crypto_secretstream_xchacha20poly1305_abytes())
        guard length >= overhead, length <= ArchiveHeader.maximumMessageBytes else { throw ArchiveRecord.malformed("a message length is out of range") }
        var sealed = [UInt8](repeating: 0, count: length)
        guard ArchiveReader.readExactly(fd, &sealed) else { throw ArchiveRecord.malformed("it is cut short") }
        var message = try SecureBuffer(capacity: length - overhead)
        var tag: UInt8 = 0
        var failed = false
        let associated = self.associated
        message.withUnsafeMutableStorage { out in
            state.withUnsafeMutableStorage { storage in
                failed = crypto_secretstream_xchacha20poly1305_pull(
                    storage.baseAddress!.assumingMemoryBound(to: crypto_secretstream_xchacha20poly1305_state.self), out.baseAddress?.assumingMemoryBound(to: UInt8.self), nil, &tag,
                    sealed, UInt64(sealed.count), associated.isEmpty ? nil : associated, UInt64(associated.count)) != 0
                return storage.count
            }
            return failed ? 0 : out.count
        }
        guard !failed else {
            // The first message is where a wrong passphrase shows; later, only a change can fail.
            if !self.associated.isEmpty { throw .wrongPassphrase }
            throw ArchiveRecord.malformed("a message failed authentication: it was changed")
        }
        self.associated = []
        let decoded = try message.withUnsafeBytes { (bytes) throws(VaultError) in try ArchiveRecord.decode(bytes) }
        let final = tag == UInt8(crypto_secretstream_xchacha20poly1305_tag_final())
        switch decoded {
        case .entry(let entry):
            guard !final else { throw ArchiveRecord.malformed("an entry is tagged as the end") }
            return entry
        case .end(let count):
            guard final else { throw ArchiveRecord.malformed("the end record is not tagged FINAL") }
            guard count == seen else { throw ArchiveRecord.malformed("it ends after \(seen) entries, not the \(count) written") }
            var extra: UInt8 = 0
            guard (try? withUnsafeMutableBytes(of: &extra) { try FileDescriptor(rawValue: fd).read(into: $0) }) == 0 else { throw ArchiveRecord.malformed("bytes follow its end") }
            ended = true
            return nil
        }
    }

    private static func readExactly(_ fd: Int32, _ buffer: inout [UInt8]) -> Bool {
        let count = buffer.count
        return (try? buffer.withUnsafeMutableBytes { try FileDescriptor(rawValue: fd).readFully(into: $0) }) == count
    }
}
