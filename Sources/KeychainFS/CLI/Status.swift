import ArgumentParser
import Daemon
import Support
import VaultCore

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a mount's state (or every mount and secret-service of yours): vault, locked or not, items, idle lock, daemon."
    )

    @Flag(help: "Print JSON (an object for one mountpoint, an array for all).") var json = false
    @Argument(help: "The mountpoint (default: every mount of this user).") var mountpoint: String?

    func run() throws {
        try reportingFailures { () throws(CommandFailure) in
            if let mountpoint {
                let status = try Status.ask(socket: RuntimeState.socketPath(for: Mountpoint.resolved(mountpoint)))
                Terminal.writeAll(1, (json ? try MountStatus.json(status) : Status.describe(status) + "\n" + Status.hostKeyLine) + "\n")
                return
            }
            // A record whose daemon is gone (killed) answers nothing: it is not a mount.
            let statuses = RuntimeState.allRecords().compactMap { try? Status.ask(socket: $0.socketPath) }
            if json {
                Terminal.writeAll(1, try MountStatus.json(statuses) + "\n")
            } else {
                Terminal.writeAll(1, (statuses.isEmpty ? "no keychainfs mounts\n" : statuses.map(Status.describe).joined(separator: "\n") + "\n")
                    + Status.hostKeyLine + "\n")
            }
        }
    }

    /// What holds this machine's host key: the TPM, or a file, and why.
    static var hostKeyLine: String { "this-device-only items: " + HostKey.holder.description }

    private static func ask(socket: String) throws(CommandFailure) -> MountStatus {
        // A running daemon answers at once; one stopped must not hold up the others' lines.
        try MountStatus(reply: ControlSocket.request(socket: socket, "status", replySeconds: 5))
    }

    static func describe(_ status: MountStatus) -> String {
        let idle = status.idleLockSeconds.map { seconds in
            "after \(seconds) s without access" + (status.locksInSeconds.map { " (locks in \($0) s)" } ?? "")
        } ?? "off"
        return """
            \(status.mountpoint.map(Terminal.printable) ?? "(secret-service, no mount)")
              vault:     \(Terminal.printable(status.vault))
              state:     \(status.locked ? "locked" : "unlocked")
              items:     \(status.items.map(String.init) ?? "unknown")
              idle lock: \(idle)
              daemon:    pid \(status.pid)
            """ + (status.transport.map { "\n  transport: \($0)" } ?? "")
    }
}
