import Foundation
import Glibc
import Synchronization

/// Stands between a mount's daemon and a PostgreSQL server on Unix sockets: passes every byte
/// on, and counts the client's messages after which libpq waits for the server: Sync, Flush
/// and a simple Query. That is the number of round trips, whatever the daemon believes it sent.
final class PostgresRoundTripCounter: @unchecked Sendable {
    /// Give it as the URI's `host` in place of the server's.
    let socketDirectory: String
    private let server: String
    private let listener: Int32
    private let counted = Tally()

    var roundTrips: Int { counted.value.load(ordering: .sequentiallyConsistent) }

    private final class Tally: Sendable {
        let value = Atomic<Int>(0)
    }

    init(to server: PostgresServer) throws {
        // Short: the socket's path must fit in a sockaddr_un.
        socketDirectory = "/tmp/kcfs-rt-" + UUID().uuidString.prefix(8)
        self.server = server.socketDirectory + "/.s.PGSQL.\(server.port)"
        try FileManager.default.createDirectory(atPath: socketDirectory, withIntermediateDirectories: true)
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { throw FixtureError("socket: \(String(cString: strerror(errno)))") }
        let path = socketDirectory + "/.s.PGSQL.\(server.port)"
        guard PostgresRoundTripCounter.withAddress(path, { bind(listener, $0, $1) }) == 0, Glibc.listen(listener, 16) == 0 else {
            close(listener)
            throw FixtureError("cannot listen on \(path): \(String(cString: strerror(errno)))")
        }
        // Not `self`: the thread holding it would keep `deinit` (which ends the thread and
        // removes the directory) from ever running.
        Thread.detachNewThread { [listener, server = self.server, counted] in
            PostgresRoundTripCounter.accepting(listener: listener, server: server, counted: counted)
        }
    }

    deinit {
        // Wakes the accept; connections end when the daemon closes them (at unmount).
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        try? FileManager.default.removeItem(atPath: socketDirectory)
    }

    private static func withAddress(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    private static func accepting(listener: Int32, server: String, counted: Tally) {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                return
            }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            let upstream = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard upstream >= 0, PostgresRoundTripCounter.withAddress(server, { connect(upstream, $0, $1) }) == 0 else {
                close(client)
                if upstream >= 0 { close(upstream) }
                continue
            }
            let answered = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                PostgresRoundTripCounter.pump(from: upstream, to: client, counting: nil)
                answered.signal()
            }
            Thread.detachNewThread { [counted] in
                PostgresRoundTripCounter.pump(from: client, to: upstream, counting: counted)
                shutdown(upstream, Int32(SHUT_RDWR))
                shutdown(client, Int32(SHUT_RDWR))
                answered.wait()
                close(upstream)
                close(client)
            }
        }
    }

    /// Copies until either end closes; with `counting`, parses the client's messages (the
    /// startup packet first, untyped) and counts those that make it wait.
    private static func pump(from source: Int32, to sink: Int32, counting: Tally?) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        var pending: [UInt8] = []
        var started = false
        while true {
            let count = read(source, &buffer, buffer.count)
            guard count > 0 else { return }
            var written = 0
            while written < count {
                let n = buffer.withUnsafeBytes { write(sink, $0.baseAddress! + written, count - written) }
                guard n > 0 else { return }
                written += n
            }
            guard let counting else { continue }
            pending += buffer[..<count]
            var offset = 0
            while true {
                let header = started ? 5 : 4
                guard pending.count - offset >= header else { break }
                let lengthAt = offset + (started ? 1 : 0)
                let length = pending[lengthAt..<lengthAt + 4].reduce(0) { $0 << 8 | Int($1) }
                let total = (started ? 1 : 0) + length
                guard pending.count - offset >= total else { break }
                if started, [UInt8(ascii: "S"), UInt8(ascii: "H"), UInt8(ascii: "Q")].contains(pending[offset]) {
                    counting.value.add(1, ordering: .sequentiallyConsistent)
                }
                started = true
                offset += total
            }
            pending.removeFirst(offset)
        }
    }
}
