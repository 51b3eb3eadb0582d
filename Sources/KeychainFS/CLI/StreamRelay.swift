import CSodium
import Glibc
import Support
import SystemPackage
import VaultCore

/// Copies one of the command's output streams, through a pipe, to exec's own, with the
/// secrets masked. A thread of its own: exec's main thread waits on signals.
final class StreamRelay: @unchecked Sendable {
    /// The pipe's end the command writes to, dup'ed onto its `target` by posix_spawn.
    let commandEnd: Int32
    let target: Int32
    private let readEnd: Int32
    private let mask: OutputMask
    private var thread = pthread_t()
    private static let chunk = 65536

    /// Creates the pipe and starts the thread, before the command is spawned.
    init(target: Int32, mask: OutputMask) throws(CommandFailure) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            throw CommandFailure(message: "cannot create a pipe: \(Errno(rawValue: errno))", status: .failure)
        }
        // Close-on-exec (no other thread spawns meanwhile): the command gets only the end
        // dup'ed onto its stream.
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        readEnd = ends[0]
        commandEnd = ends[1]
        self.target = target
        self.mask = mask
        let context = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(&thread, nil, { context in
            let relay = Unmanaged<StreamRelay>.fromOpaque(context!).takeRetainedValue()
            // A closed reader must fail our write (EPIPE), not end exec before it cleans up.
            var pipeSignal = sigset_t()
            sigemptyset(&pipeSignal)
            sigaddset(&pipeSignal, SIGPIPE)
            pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
            relay.relay()
            StackWipe.here()
            return nil
        }, context)
        guard rc == 0 else {
            Unmanaged<StreamRelay>.fromOpaque(context).release()
            close(readEnd)
            close(commandEnd)
            throw CommandFailure(message: "cannot start a thread: \(Errno(rawValue: rc))", status: .failure)
        }
    }

    /// Call once the command is spawned (or failed to be): the relay then ends when the
    /// command, and whatever inherited its stream, have closed it.
    func closeCommandEnd() { close(commandEnd) }

    /// Waits until everything the command wrote has been passed on.
    func finish() { pthread_join(thread, nil) }

    private func relay() {
        defer { close(readEnd) }
        guard var buffer = try? SecureBuffer(capacity: Self.chunk + mask.longest) else { return }
        let target = self.target
        buffer.withUnsafeMutableStorage { storage in
            let base = storage.baseAddress!
            var held = 0
            while true {
                let count = read(readEnd, base + held, storage.count - held)
                if count < 0 && errno == EINTR { continue }
                let total = held + max(count, 0)
                let final = count <= 0
                let emitted = mask.scan(UnsafeRawBufferPointer(start: base, count: total), final: final) { bytes in
                    Self.writeAll(bytes, to: target)
                }
                guard let emitted else { break }
                held = total - emitted
                if held > 0 { memmove(base, base + emitted, held) }
                sodium_memzero(base + held, total - held)
                if final { break }
            }
            sodium_memzero(base, storage.count)
            return 0
        }
    }

    private static func writeAll(_ bytes: UnsafeRawBufferPointer, to target: Int32) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = write(target, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }
}
