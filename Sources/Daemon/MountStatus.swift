import FoundationEssentials
import Glibc
import Support

/// What `keychainfs status` reports of a mount (or of a Secret Service serving a vault without
/// one): the daemon's reply to `status`, and what `status --json` prints (one object, or an
/// array of them for every daemon).
package struct MountStatus: Codable, Equatable {
    /// Nil for a Secret Service without a mount.
    package let mountpoint: String?
    package let vault: String
    package let pid: pid_t
    package let locked: Bool
    /// Nil while locked: counting needs the keys.
    package let items: Int?
    package let idleLockSeconds: Int?
    package let idleSeconds: Int64
    /// Nil when locked or when there is no idle lock.
    package let locksInSeconds: Int64?
    /// How the kernel's requests reach the mount (`dev-fuse`, `io-uring`); nil without a mount.
    package var transport: String? = nil
    /// For a PostgreSQL vault with an offline replica: when (seconds since the epoch) its
    /// server was found unreachable, nil while live.
    package var offlineSince: Int64? = nil
    /// When the replica last matched the server (seconds since the epoch); nil without one.
    package var replicaCopiedAt: Int64? = nil
    /// The server's generation when it was found older than the replica's (a dump restored).
    package var serverGeneration: Int64? = nil
    package var replicaGeneration: Int64? = nil

    private enum CodingKeys: String, CodingKey {
        case mountpoint, vault, pid, locked, items
        case idleLockSeconds = "idle_lock_seconds"
        case idleSeconds = "idle_seconds"
        case locksInSeconds = "locks_in_seconds"
        case transport
        case offlineSince = "offline_since"
        case replicaCopiedAt = "replica_copied_at"
        case serverGeneration = "server_generation"
        case replicaGeneration = "replica_generation"
    }

    /// Absent values are written as null rather than left out, so every field is always there
    /// for scripts to read.
    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(mountpoint, forKey: .mountpoint)
        try container.encode(vault, forKey: .vault)
        try container.encode(pid, forKey: .pid)
        try container.encode(locked, forKey: .locked)
        try container.encode(items, forKey: .items)
        try container.encode(idleLockSeconds, forKey: .idleLockSeconds)
        try container.encode(idleSeconds, forKey: .idleSeconds)
        try container.encode(locksInSeconds, forKey: .locksInSeconds)
        try container.encode(transport, forKey: .transport)
        try container.encode(offlineSince, forKey: .offlineSince)
        try container.encode(replicaCopiedAt, forKey: .replicaCopiedAt)
        try container.encode(serverGeneration, forKey: .serverGeneration)
        try container.encode(replicaGeneration, forKey: .replicaGeneration)
    }
}

extension MountStatus {
    package init(mountpoint: String?, vault: String, pid: pid_t, locked: Bool, items: Int?, idleLockSeconds: Int?, idleSeconds: Int64) {
        self.init(mountpoint: mountpoint, vault: vault, pid: pid, locked: locked, items: items,
                  idleLockSeconds: idleLockSeconds, idleSeconds: idleSeconds,
                  locksInSeconds: locked ? nil : idleLockSeconds.map { max(0, Int64($0) - idleSeconds) })
    }

    /// One line of JSON (the control protocol is line-based), keys in a stable order, paths
    /// with their slashes as they are.
    package static func json(_ value: some Encodable) throws(CommandFailure) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return String(decoding: try encoder.encode(value), as: UTF8.self)
        } catch {
            throw CommandFailure(message: "cannot encode the status: \(error)", status: .failure)
        }
    }

    /// A daemon's reply to `status`.
    package init(reply: String) throws(CommandFailure) {
        do {
            self = try JSONDecoder().decode(MountStatus.self, from: Data(reply.utf8))
        } catch {
            throw CommandFailure(message: "the daemon's status reply cannot be read", status: .failure)
        }
    }
}
