import Admission
import Glibc
import Support
import VaultCore

/// `read` and `list` for `keychainfs exec`: an item's bytes, or the names of the items in a
/// dictionary, to a client of the mounting user, without the passphrase, while the mount is
/// unlocked. The access rules judge the connecting process (SO_PEERCRED), the same way they
/// judge a process that opens a file under the mountpoint, and the access log records it.
///
/// Reply: `ok N` and N bytes (for `list`, names each ended by a NUL byte).
extension ControlServer {
    /// A path is at most this long: the vault's own limit on a path.
    static let maximumPathBytes = 4096

    func serveSecret(_ connection: Int32, listing: Bool, pathBytes count: Int, sender: MessageSender) {
        let caller = sender.context
        do throws(VaultError) {
            var pathBuffer = try SecureBuffer(capacity: count)
            guard try readPayload(connection, into: &pathBuffer, exactly: count, from: sender) else {
                refuse(connection, .shortPath, .usage, "short path, or written by another process than the request")
                return
            }
            let path = try pathBuffer.withUnsafeBytes { (bytes) throws(VaultError) -> VaultPath in
                VaultPath(components: try bytes.split(separator: UInt8(ascii: "/")).map { (name) throws(VaultError) in
                    try ItemName(bytes: name)
                })
            }
            // After-first-unlock items stay readable through the mount while it is locked;
            // here nothing is: exec then asks for the passphrase instead.
            guard !served.locking.isLocked else { throw .locked }
            let node = try served.vault.node(at: path)
            let check = listing ? AccessCheck(access: .list, target: .node(node.id))
                                : AccessCheck(access: .read, target: .node(node.id), isAlwaysRecorded: true)
            try admit(check, caller)
            // An access like any other: it holds off the idle lock.
            served.locking.noteActivity()
            let reply = try listing ? itemNames(in: path) : served.vault.read(path)
            ControlSocket.send(connection, "ok \(reply.count)")
            _ = reply.withUnsafeBytes { Terminal.writeAll(connection, $0) }
        } catch {
            ControlSocket.sendError(connection, ExitStatus.code(for: error), error.description)
        }
    }

    /// Throws the refusal unless the rules let `caller` have the access, asking on this
    /// connection's own thread when a `--confirm` rule says so.
    private func admit(_ check: AccessCheck, _ caller: RequestContext) throws(VaultError) {
        if let refusal = served.gate.admitWaiting([check], caller) { throw refusal }
    }

    /// The names of the items (not dictionaries) directly in the dictionary at `path`, each
    /// followed by a NUL byte, in locked memory.
    private func itemNames(in path: VaultPath) throws(VaultError) -> SecureBuffer {
        var names = try SecureBuffer(capacity: 4096)
        for entry in try served.vault.list(path) where entry.node.kind == .item {
            try entry.name.withUnsafeBytes { (bytes) throws(VaultError) in try names.append(bytes) }
            var end: UInt8 = 0
            try withUnsafeBytes(of: &end) { (bytes) throws(VaultError) in try names.append(bytes) }
        }
        return names
    }
}
