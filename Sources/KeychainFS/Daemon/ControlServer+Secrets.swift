import Glibc
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

    func serveSecret(_ connection: Int32, listing: Bool, pathBytes count: Int, caller: RequestContext) {
        do throws(VaultError) {
            var pathBuffer = try SecureBuffer(capacity: count)
            guard try SecretInput.read(connection, into: &pathBuffer, exactly: count) else {
                refuse(connection, .shortPath, .usage, "short path")
                return
            }
            let path = try pathBuffer.withUnsafeBytes { (bytes) throws(VaultError) -> VaultPath in
                VaultPath(components: try bytes.split(separator: UInt8(ascii: "/")).map { (name) throws(VaultError) in
                    try ItemName(bytes: name)
                })
            }
            // After-first-unlock items stay readable through the mount while it is locked;
            // here nothing is: exec then asks for the passphrase instead.
            guard !fileSystem.isLocked else { throw .locked }
            let node = try fileSystem.vault.node(at: path)
            let check = listing ? AccessCheck(access: .list, target: .node(node.id))
                                : AccessCheck(access: .read, target: .node(node.id), isItemOpen: true)
            try admit(check, caller)
            // An access like any other: it holds off the idle lock.
            fileSystem.noteActivity()
            let reply = try listing ? itemNames(in: path) : fileSystem.vault.read(path)
            ControlSocket.send(connection, "ok \(reply.count)")
            _ = reply.withUnsafeBytes { Terminal.writeAll(connection, $0) }
        } catch {
            ControlSocket.sendError(connection, ExitStatus.code(for: error), error.description)
        }
    }

    /// Throws the refusal unless the rules let `caller` have the access, asking for a
    /// confirmation (on this request's own thread) when a `--confirm` rule says so, then
    /// deciding again as the mount does: a rule may change while the user is asked (answers
    /// given are remembered, so no one is asked twice for one request; a confirm rule never
    /// evaluates to allowed, so the second ask is what admits).
    private func admit(_ check: AccessCheck, _ caller: RequestContext) throws(VaultError) {
        guard case .needsConfirmation(let pending) = try verdict(check, caller) else { return }
        if let denial = fileSystem.gate.confirm(pending) { throw .accessDenied(denial) }
        guard case .needsConfirmation(let again) = try verdict(check, caller) else { return }
        if let denial = fileSystem.gate.confirm(again) { throw .accessDenied(denial) }
    }

    /// The gate's verdict; a refusal thrown.
    private func verdict(_ check: AccessCheck, _ caller: RequestContext) throws(VaultError) -> AccessGate.Verdict {
        let verdict = fileSystem.gate.evaluate([check], caller)
        if case .refused(let error) = verdict { throw error }
        return verdict
    }

    /// The names of the items (not dictionaries) directly in the dictionary at `path`, each
    /// followed by a NUL byte, in locked memory.
    private func itemNames(in path: VaultPath) throws(VaultError) -> SecureBuffer {
        var names = try SecureBuffer(capacity: 4096)
        for entry in try fileSystem.vault.list(path) where entry.node.kind == .item {
            try entry.name.withUnsafeBytes { (bytes) throws(VaultError) in try names.append(bytes) }
            var end: UInt8 = 0
            try withUnsafeBytes(of: &end) { (bytes) throws(VaultError) in try names.append(bytes) }
        }
        return names
    }
}
