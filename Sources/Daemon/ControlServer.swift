import CLinux
import FUSEDriver
import Glibc
import Keyring
import Support
import SystemCalls
import SystemPackage
import VaultCore

/// The control socket of a mount or of a Secret Service without one: `lock`, `unlock` (with a
/// passphrase) and `status`, and the command line's requests, from the mounting user or root
/// only (SO_PEERCRED).
///
/// Requests are a line: `lock`, `status`, or `unlock N` followed by N passphrase bytes; or
/// `read N` / `list N` followed by an N-byte item path (`keychainfs exec`, see
/// ControlServer+Secrets); or a command line's request (ControlServer+Commands). Replies are a
/// line: `ok ...` or `error STATUS MESSAGE`.
final class ControlServer: Sendable {
    let path: String
    let served: ServedVault
    private let listener: Int32

    init(serving served: ServedVault, at record: RuntimeState.MountRecord) throws(CommandFailure) {
        self.served = served
        try RuntimeState.ensureDirectory()
        path = record.socketPath
        unlink(path)
        listener = try ControlSocket.listen(at: path)
        // On the listener, which connections inherit at connect(): a client may write before the
        // daemon accepts, and the kernel records who wrote only if the receiver asks by then.
        MessageSender.enable(on: listener)
    }

    func start() {
        HelperThread.start { [self] in
            while true {
                let connection: Int32
                do throws(Errno) {
                    connection = try SystemCall.retrying { accept(listener, nil, nil) }
                } catch .connectionAbort {
                    continue
                } catch {
                    DaemonLog.controlSocketStopped(errno: error)
                    return
                }
                // One thread per request: a client that says nothing holds up no one else.
                HelperThread.start { [self] in
                    serve(connection)
                    ControlServer.discardUnread(connection)
                    close(connection)
                }
            }
        }
    }

    func stop() {
        unlink(path)
    }

    /// A Unix socket closed with bytes unread resets its peer, which may then lose the reply
    /// already sent (a refusal of a request whose payload was never read): what has arrived
    /// is read and dropped first, without waiting for more.
    private static func discardUnread(_ connection: Int32) {
        shutdown(connection, Int32(SHUT_WR))
        var scratch = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<16 {
            guard recv(connection, &scratch, scratch.count, Int32(MSG_DONTWAIT)) > 0 else { break }
        }
        for index in scratch.indices { scratch[index] = 0 }
    }

    private func serve(_ connection: Int32) {
        var peer: uid_t = 0, peerPID: pid_t = 0, peerGroup: gid_t = 0
        let peerKnown = clinux_peer_credentials(connection, &peerPID, &peer, &peerGroup) == 0
        guard peerKnown, peer == getuid() || peer == 0 else {
            refuse(connection, .peerNotAllowed(uid: peerKnown ? peer : nil), .failure, "permission denied: not the mounting user")
            return
        }
        ControlSocket.setTimeout(connection, SO_RCVTIMEO, seconds: 5)
        // A client that stops reading cannot hold this thread, its reply's plaintext, or an
        // export's read of the vault (which other requests wait for) longer than this.
        ControlSocket.setTimeout(connection, SO_SNDTIMEO, seconds: 10)
        MessageSender.enable(on: connection)
        // The request line is short and parsed as bytes, then wiped: a passphrase sent by
        // mistake in its place must not linger in a Swift string.
        var (line, sender) = ControlSocket.readRequestLine(connection)
        defer { wipe(&line) }
        let words = line.split(separator: 0x20).map { String(decoding: $0, as: UTF8.self) }
        switch words.first {
        case "status":
            do throws(CommandFailure) {
                ControlSocket.send(connection, "ok " + (try MountStatus.json(status())))
            } catch {
                ControlSocket.sendError(connection, error.status, error.message)
            }
        case "lock":
            served.locking.lock()
            ControlSocket.send(connection, "ok locked")
        case "unlock":
            // `unlock N`, or `unlock N pin` for the TPM PIN slot.
            let kind = words.count == 3 ? UnlockSecret(rawValue: words[2]) : .passphrase
            guard (2...3).contains(words.count), let kind, words[1].allSatisfy(\.isNumber), let count = Int(words[1]),
                  (1...SecretInput.maximumPassphraseBytes).contains(count) else {
                refuse(connection, .malformedUnlock, .usage, "malformed unlock request")
                return
            }
            do throws(VaultError) {
                guard try unlock(with: connection, passphraseBytes: count, as: kind) else {
                    refuse(connection, .shortPassphrase, .usage, "short passphrase")
                    return
                }
                // Only now, with the passphrase wiped, may the client learn it worked.
                ControlSocket.send(connection, "ok unlocked")
            } catch {
                ControlSocket.sendError(connection, ExitStatus.code(for: error), error.description)
            }
        case "read", "list":
            guard words.count == 2, words[1].allSatisfy(\.isNumber), let count = Int(words[1]),
                  (1...ControlServer.maximumPathBytes).contains(count) else {
                refuse(connection, .malformedRead, .usage, "malformed \(words[0]) request")
                return
            }
            // Judged as the process that wrote the request, not the one that connected: that
            // one may have exec'd an admitted program and left its socket to another.
            guard let sender, sender.uid == peer else {
                refuse(connection, .unknownWriter, .failure, "permission denied: the request's writer cannot be told")
                return
            }
            serveSecret(connection, listing: words[0] == "list", pathBytes: count, sender: sender)
        case "cmd":
            guard words.count == 3, let verb = ControlRequest(rawValue: words[1]), words[2].allSatisfy(\.isNumber),
                  let count = Int(words[2]), count >= 0 else {
                refuse(connection, .malformedCommand, .usage, "malformed command request")
                return
            }
            guard let sender, sender.uid == peer else {
                refuse(connection, .unknownWriter, .failure, "permission denied: the request's writer cannot be told")
                return
            }
            serveCommand(connection, verb, payloadBytes: count, sender: sender)
        default:
            refuse(connection, .unknownRequest, .usage, "unknown request")
        }
    }

    /// The client hears why; the log hears it too, since a refused client may be no one the
    /// mounting user knows of.
    func refuse(_ connection: Int32, _ refusal: DaemonLog.Refusal, _ status: ExitStatus, _ reply: String) {
        DaemonLog.refusedControlRequest(refusal)
        ControlSocket.sendError(connection, status, reply)
    }

    /// Reads the passphrase and unlocks; the passphrase's buffer is wiped when this returns.
    private func unlock(with connection: Int32, passphraseBytes count: Int, as kind: UnlockSecret) throws(VaultError) -> Bool {
        var passphrase = try SecureBuffer(capacity: count)
        guard try SecretInput.read(connection, into: &passphrase, exactly: count) else { return false }
        try served.locking.unlock(passphrase, as: kind)
        return true
    }

    func status() -> MountStatus {
        var status = MountStatus(mountpoint: served.mountpoint, vault: served.shownVault, pid: getpid(), locked: served.locking.isLocked,
                                 items: try? served.vault.itemCount(), idleLockSeconds: served.idleLockSeconds,
                                 idleSeconds: served.idleSeconds())
        status.transport = served.transport()
        if let offline = served.vault.offlineState {
            status.offlineSince = offline.offlineSince
            status.replicaCopiedAt = offline.replicaCopiedAt
            status.serverGeneration = offline.serverRolledBack?.found
            status.replicaGeneration = offline.serverRolledBack?.newest
        }
        return status
    }
}
