/// How a PostgreSQL vault with an offline replica is being served, for `status` and the log.
public struct OfflineState: Equatable, Sendable {
    /// When (seconds since the epoch) the server was found unreachable; nil while live.
    public let offlineSince: Int64?
    /// When the replica last matched the server (seconds since the epoch); nil before the first copy.
    public let replicaCopiedAt: Int64?
    /// The server's generation and the newer one the replica holds, when the server was found
    /// older than the replica (a dump restored): served from the replica, changes refused.
    public let serverRolledBack: (found: Int64, newest: Int64)?

    public var isLive: Bool { offlineSince == nil && serverRolledBack == nil }

    public static func == (a: OfflineState, b: OfflineState) -> Bool {
        a.offlineSince == b.offlineSince && a.replicaCopiedAt == b.replicaCopiedAt
            && a.serverRolledBack?.found == b.serverRolledBack?.found && a.serverRolledBack?.newest == b.serverRolledBack?.newest
    }
}
