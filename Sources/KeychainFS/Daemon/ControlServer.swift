import CLinux
import Glibc
import VaultCore

/// What `keychainfs status` reports of a mount.
struct MountStatus {
    let mountpoint: String
    let vault: String
    let pid: pid_t
    let locked: Bool
    let items: Int?
    let idleLockSeconds: Int?
    let idleSeconds: Int64

    var json: String {
        let idle = idleLockSeconds.map { String($0) } ?? "null"
        let locksIn = idleLockSeconds.map { String(max(0, Int64($0) - idleSeconds)) } ?? "null"
        return "{\"mountpoint\":\(JSON.string(mountpoint)),\"vault\":\(JSON.string(vault)),\"pid\":\(pid),"
            + "\"locked\":\(locked),\"items\":\(items.map(String.init) ?? "null"),\"idle_lock_seconds\":\(idle),"
            + "\"idle_seconds\":\(idleSeconds),\"locks_in_seconds\":\(locked ? "null" : locksIn)}"
    }
}

enum JSON {
    static func string(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}

/// The control socket of a mount: `lock`, `unlock` (with a passphrase) and `status`, one
/// request per connection, from the mounting user or root only (SO_PEERCRED).
///
/// Requests are a line: `lock`, `status`, or `unlock N` followed by N passphrase bytes.
/// Replies are a line: `ok ...` or `error STATUS MESSAGE`.
final class ControlServer: Sendable {
    let path: String
    private let fileSystem: FileSystem
    private let mountpoint: String
    private let vaultPath: String
    private let idleLockSeconds: Int?
    private let listener: Int32

    init(fileSystem: FileSystem, mountpoint: String, vaultPath: String, idleLockSeconds: Int?) throws(CommandFailure) {
        self.fileSystem = fileSystem
        self.mountpoint = mountpoint
        self.vaultPath = vaultPath
        self.idleLockSeconds = idleLockSeconds
        try RuntimeState.ensureDirectory()
        path = RuntimeState.socketPath(for: mountpoint)
        unlink(path)
        listener = try ControlSocket.listen(at: path)
    }

    func start() {
        HelperThread.start { [self] in
            while true {
                let connection = accept(listener, nil, nil)
                if connection < 0 {
                    if errno == EINTR || errno == ECONNABORTED { continue }
                    return
                }
                // One thread per request: a client that says nothing holds up no one else.
                HelperThread.start { [self] in
                    serve(connection)
                    close(connection)
                }
            }
        }
    }

    func stop() {
        unlink(path)
    }

    private func serve(_ connection: Int32) {
        var peer: uid_t = 0
        guard clinux_peer_uid(connection, &peer) == 0, peer == getuid() || peer == 0 else {
            ControlSocket.send(connection, "error \(ExitStatus.failure) permission denied: not the mounting user")
            return
        }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        // The request line is short and parsed as bytes, then wiped: a passphrase sent by
        // mistake in its place must not linger in a Swift string.
        var line = ControlSocket.readRequestLine(connection)
        defer { wipe(&line) }
        let words = line.split(separator: 0x20).map { String(decoding: $0, as: UTF8.self) }
        switch words.first {
        case "status":
            ControlSocket.send(connection, "ok " + status().json)
        case "lock":
            fileSystem.lock()
            ControlSocket.send(connection, "ok locked")
        case "unlock":
            guard words.count == 2, words[1].allSatisfy(\.isNumber), let count = Int(words[1]),
                  (1...SecretInput.maximumPassphraseBytes).contains(count) else {
                ControlSocket.send(connection, "error \(ExitStatus.usage) malformed unlock request")
                return
            }
            do throws(VaultError) {
                guard try unlock(with: connection, passphraseBytes: count) else {
                    ControlSocket.send(connection, "error \(ExitStatus.usage) short passphrase")
                    return
                }
                // Only now, with the passphrase wiped, may the client learn it worked.
                ControlSocket.send(connection, "ok unlocked")
            } catch {
                ControlSocket.send(connection, "error \(ExitStatus.code(for: error)) \(error.description)")
            }
        default:
            ControlSocket.send(connection, "error \(ExitStatus.usage) unknown request")
        }
    }

    /// Reads the passphrase and unlocks; the passphrase's buffer is wiped when this returns.
    private func unlock(with connection: Int32, passphraseBytes count: Int) throws(VaultError) -> Bool {
        var passphrase = try SecureBuffer(capacity: count)
        guard try SecretInput.read(connection, into: &passphrase, exactly: count) else { return false }
        try fileSystem.unlock(passphrase: passphrase)
        return true
    }

    func status() -> MountStatus {
        MountStatus(mountpoint: mountpoint, vault: vaultPath, pid: getpid(), locked: fileSystem.isLocked,
                    items: try? fileSystem.vault.itemCount(), idleLockSeconds: idleLockSeconds,
                    idleSeconds: fileSystem.secondsSinceActivity)
    }
}

/// Unix-socket plumbing shared by the server and the `lock`/`unlock`/`status` commands.
enum ControlSocket {
    private static func address(_ path: String) throws(CommandFailure) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw CommandFailure(message: "control socket path too long: \(path)", status: ExitStatus.failure)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        return address
    }

    static func listen(at path: String) throws(CommandFailure) -> Int32 {
        var address = try address(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw CommandFailure(message: "cannot create the control socket", status: ExitStatus.failure) }
        let previous = umask(0o177)  // the socket file is 0600 from the start
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        umask(previous)
        guard bound == 0, Glibc.listen(fd, 8) == 0 else {
            close(fd)
            throw CommandFailure(message: "cannot listen on \(path): \(String(cString: strerror(errno)))", status: ExitStatus.failure)
        }
        return fd
    }

    static func connect(to path: String) throws(CommandFailure) -> Int32 {
        var address = try address(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw CommandFailure(message: "cannot create a socket", status: ExitStatus.failure) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw CommandFailure(message: "no keychainfs daemon answers for this mount (\(String(cString: strerror(errno))))",
                                 status: ExitStatus.mountFailure)
        }
        return fd
    }

    /// Never raises SIGPIPE: a client that went away must not take the daemon with it.
    static func send(_ fd: Int32, _ line: String) {
        var bytes = Array((line + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }

    /// A request line: at most 32 bytes (the longest valid one is `unlock 4096`), within the
    /// socket's receive timeout for each byte and 5 s in all.
    static func readRequestLine(_ fd: Int32) -> [UInt8] {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        let deadline = FileSystem.monotonicSeconds() + 5
        while bytes.count < 32 && FileSystem.monotonicSeconds() <= deadline {
            let n = read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 || byte == 0x0A { break }
            bytes.append(byte)
        }
        byte = 0
        return bytes
    }

    static func readLine(_ fd: Int32, limit: Int = 65536) -> String {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while bytes.count < limit {
            let n = read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 || byte == 0x0A { break }
            bytes.append(byte)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Sends a request (and, for unlock, the passphrase bytes) and returns the `ok` payload.
    static func request(_ mountpoint: String, _ line: String,
                        then writeMore: (Int32) -> Void = { _ in }) throws(CommandFailure) -> String {
        let fd = try connect(to: RuntimeState.socketPath(for: mountpoint))
        defer { close(fd) }
        // An unlock derives a key (seconds with the sensitive preset); nothing takes longer.
        var timeout = timeval(tv_sec: 120, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        send(fd, line)
        writeMore(fd)
        let reply = readLine(fd)
        if reply.hasPrefix("ok") { return String(reply.dropFirst(3)) }
        if reply.hasPrefix("error ") {
            let rest = reply.dropFirst(6)
            throw CommandFailure(message: String(rest.drop { $0 != " " }.dropFirst()),
                                 status: Int32(rest.prefix { $0 != " " }) ?? ExitStatus.failure)
        }
        throw CommandFailure(message: "the daemon gave no answer", status: ExitStatus.failure)
    }
}
