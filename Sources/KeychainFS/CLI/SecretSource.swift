import Daemon
import Glibc
import Support
import VaultCore

/// Where `keychainfs exec` reads secrets: the daemon of a running mount (or secret-service) of
/// the vault, over its control socket (no passphrase; the access rules judge this process, as they judge any
/// process reading under the mountpoint), or the vault itself, opened with the passphrase.
enum SecretSource {
    case daemon(socket: String)
    case vault(Vault)

    /// The item's bytes, in locked memory.
    func read(_ path: VaultPath) throws(CommandFailure) -> SecureBuffer {
        switch self {
        case .daemon(let socket):
            return try SecretSource.ask(socket, "read", path)
        case .vault(let vault):
            do throws(VaultError) {
                let content = try vault.read(path)
                // A team vault's log holds what a member's exec read, as a mount's would.
                try vault.logged(.read, at: path)
                return content
            } catch {
                throw CommandFailure(error)
            }
        }
    }

    /// The items (not dictionaries) directly in the dictionary at `path`, by name.
    func itemNames(in path: VaultPath) throws(CommandFailure) -> [ItemName] {
        switch self {
        case .daemon(let socket):
            let names = try SecretSource.ask(socket, "list", path)
            return try CommandFailure.vault { () throws(VaultError) in
                try names.withUnsafeBytes { (bytes) throws(VaultError) in
                    try bytes.split(separator: 0).map { (name) throws(VaultError) in try ItemName(bytes: name) }
                }
            }
        case .vault(let vault):
            return try CommandFailure.vault { () throws(VaultError) in
                try vault.list(path).filter { $0.node.kind == .item }.map(\.name)
            }
        }
    }

    /// One `read` or `list` request; the path goes as bytes after the request line, the
    /// answer's bytes straight into locked memory.
    private static func ask(_ socket: String, _ verb: String, _ path: VaultPath) throws(CommandFailure) -> SecureBuffer {
        let fd = try ControlSocket.connect(to: socket)
        defer { close(fd) }
        // A `--confirm` rule may keep the answer waiting for the user (30 s by default).
        ControlSocket.setTimeout(fd, SO_RCVTIMEO, seconds: 120)
        let request = try SecretSource.encoded(path)
        ControlSocket.send(fd, "\(verb) \(request.count)")
        guard request.withUnsafeBytes({ Terminal.writeAll(fd, $0) }) else {
            throw CommandFailure(message: "the mount's daemon went away", status: .failure)
        }
        return try SecretSource.answer(fd)
    }

    /// The path's names joined by '/', in locked memory ("/" for the root).
    private static func encoded(_ path: VaultPath) throws(CommandFailure) -> SecureBuffer {
        do throws(VaultError) {
            var request = try SecureBuffer(capacity: 256)
            let slash: [UInt8] = [UInt8(ascii: "/")]
            for (index, name) in path.components.enumerated() {
                if index > 0 { try slash.withUnsafeBytes { raw in Result { () throws(VaultError) in try request.append(raw) } }.get() }
                try name.withUnsafeBytes { (bytes) throws(VaultError) in try request.append(bytes) }
            }
            if path.components.isEmpty { try slash.withUnsafeBytes { raw in Result { () throws(VaultError) in try request.append(raw) } }.get() }
            return request
        } catch {
            throw CommandFailure(error)
        }
    }

    private static func answer(_ fd: Int32) throws(CommandFailure) -> SecureBuffer {
        let reply = ControlSocket.readLine(fd, limit: 4096)
        guard reply.hasPrefix("ok "), let count = Int(reply.dropFirst(3)), count >= 0 else {
            throw ControlSocket.failure(reply)
        }
        do throws(VaultError) {
            var content = try SecureBuffer(capacity: max(count, 1))
            if try SecretInput.read(fd, into: &content, exactly: count) { return content }
        } catch {
            throw CommandFailure(error)
        }
        throw CommandFailure(message: "the mount's daemon stopped in the middle of its answer", status: .failure)
    }
}
