import ArgumentParser
import Glibc
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
            """ + (status.transport.map { "\n  transport: \($0)" } ?? "") + (Status.server(status).map { "\n  server:    " + $0 } ?? "")
    }

    /// A PostgreSQL vault with an offline replica: live, or offline since when, and how old
    /// the replica it is read from is. nil for any other vault.
    static func server(_ status: MountStatus) -> String? {
        let now = Int64(time(nil))
        let age = status.replicaCopiedAt.map { "the replica is \(Status.duration(now - $0)) old (copied \(Status.utc($0)))" }
        if let found = status.serverGeneration, let newest = status.replicaGeneration {
            return "older than this machine's replica (generation \(found) < \(newest): an older dump restored?); "
                + "reads from the replica, changes refused; remount with -o accept_rollback to take the server's"
        }
        if let since = status.offlineSince {
            return "offline since \(Status.utc(since)); reads from the replica, changes refused" + (age.map { "; " + $0 } ?? "; no replica copied yet")
        }
        guard status.replicaCopiedAt != nil else { return nil }
        return "live" + (age.map { "; " + $0 } ?? "")
    }

    static func utc(_ seconds: Int64) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M:%S UTC", &parts)
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func duration(_ seconds: Int64) -> String {
        let s = max(0, seconds)
        if s < 120 { return "\(s) s" }
        if s < 7200 { return "\(s / 60) min" }
        if s < 172_800 { return "\(s / 3600) h" }
        return "\(s / 86400) days"
    }
}
