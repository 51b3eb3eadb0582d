import FUSEDriver
import Glibc
import Support
import SystemCalls
import SystemPackage

/// Unix-socket plumbing shared by the server and the `lock`/`unlock`/`status` commands.
package enum ControlSocket {
    private static func address(_ path: String) throws(CommandFailure) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw CommandFailure(message: "control socket path too long: \(path)", status: .failure)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        return address
    }

    static func listen(at path: String) throws(CommandFailure) -> Int32 {
        var address = try address(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw CommandFailure(message: "cannot create the control socket", status: .failure) }
        let previous = umask(0o177)  // the socket file is 0600 from the start
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        umask(previous)
        guard bound == 0, Glibc.listen(fd, 8) == 0 else {
            let error = Errno.last
            close(fd)
            throw CommandFailure(message: "cannot listen on \(path): \(error)", status: .failure)
        }
        return fd
    }

    /// How long a connect waits for a daemon whose queue of connections is full (stopped, or
    /// stuck): a Unix socket's connect would otherwise wait for ever.
    static let connectSeconds = 5

    package static func connect(to path: String) throws(CommandFailure) -> Int32 {
        var address = try address(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw CommandFailure(message: "cannot create a socket", status: .failure) }
        // A Unix socket's connect waits for room in the listener's queue up to the send timeout.
        setTimeout(fd, SO_SNDTIMEO, seconds: connectSeconds)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            let error = Errno.last
            close(fd)
            if error == .resourceTemporarilyUnavailable {
                throw CommandFailure(message: "the keychainfs daemon for this mount accepts no connection (stopped or stuck; waited \(connectSeconds) s)",
                                     status: .mountFailure)
            }
            throw CommandFailure(message: "no keychainfs daemon answers for this mount (\(error))",
                                 status: .mountFailure)
        }
        setTimeout(fd, SO_SNDTIMEO, seconds: 0)
        return fd
    }

    /// A socket's send or receive timeout (0: none).
    package static func setTimeout(_ fd: Int32, _ option: Int32, seconds: Int) {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, option, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Never raises SIGPIPE: a client that went away must not take the daemon with it.
    package static func send(_ fd: Int32, _ line: String) {
        var bytes = Array((line + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let sent = try? SystemCall.retrying {
                bytes.withUnsafeMutableBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            }
            guard let sent, sent > 0 else { return }
            offset += sent
        }
    }

    /// The reply to a request that failed: `error STATUS MESSAGE`, read back by `request`.
    static func sendError(_ fd: Int32, _ status: ExitStatus, _ message: String) {
        send(fd, "error \(status.rawValue) " + message.replacingOccurrences(of: "\n", with: " "))
    }

    /// A request line: at most 32 bytes (the longest valid one is `unlock 4096`), within the
    /// socket's receive timeout for each byte and 5 s in all.
    /// The request line and who wrote it: every byte of it must come from one writer (nil
    /// sender otherwise, or when the kernel named none).
    static func readRequestLine(_ fd: Int32) -> (line: [UInt8], sender: MessageSender?) {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        var sender: MessageSender? = nil
        var mixed = false
        let deadline = FileSystem.monotonicSeconds() + 5
        while bytes.count < 32 && FileSystem.monotonicSeconds() <= deadline {
            let (n, from) = withUnsafeMutableBytes(of: &byte) { MessageSender.receive(fd, into: $0) }
            if n <= 0 || byte == 0x0A { break }
            if let first = sender {
                if from.map({ !$0.isSameWriter(as: first) }) ?? true { mixed = true }
            } else if bytes.isEmpty {
                sender = from
            }
            bytes.append(byte)
        }
        byte = 0
        return (bytes, mixed ? nil : sender)
    }

    package static func readLine(_ fd: Int32, limit: Int = 65536) -> String {
        String(decoding: FileDescriptor(rawValue: fd).readLine(limit: limit), as: UTF8.self)
    }

    /// Sends a request (and, for unlock, the passphrase bytes) and returns the `ok` payload.
    package static func request(_ mountpoint: String, _ line: String,
                        then writeMore: (Int32) -> Void = { _ in }) throws(CommandFailure) -> String {
        try request(socket: RuntimeState.socketPath(for: mountpoint), line, then: writeMore)
    }

    /// Sends a request to the daemon listening at `socket`; see `request(_:_:then:)`. The
    /// answer is waited for up to `replySeconds`: an unlock derives a key (seconds with the
    /// sensitive preset) and nothing takes longer; a status is answered at once by a daemon
    /// that runs.
    package static func request(socket: String, _ line: String, replySeconds: Int = 120,
                                then writeMore: (Int32) -> Void = { _ in }) throws(CommandFailure) -> String {
        let fd = try connect(to: socket)
        defer { close(fd) }
        setTimeout(fd, SO_RCVTIMEO, seconds: replySeconds)
        send(fd, line)
        writeMore(fd)
        let reply = readLine(fd)
        if reply.hasPrefix("ok") { return String(reply.dropFirst(3)) }
        if reply.isEmpty {
            throw CommandFailure(message: "the keychainfs daemon gave no answer within \(replySeconds) s (stopped or stuck)", status: .failure)
        }
        throw failure(reply)
    }

    /// What a reply other than `ok ...` means for the command.
    package static func failure(_ reply: String) -> CommandFailure {
        guard reply.hasPrefix("error ") else { return CommandFailure(message: "the daemon gave no answer", status: .failure) }
        let rest = reply.dropFirst(6)
        return CommandFailure(message: String(rest.drop { $0 != " " }.dropFirst()),
                              status: ExitStatus(reported: rest.prefix { $0 != " " }))
    }
}
