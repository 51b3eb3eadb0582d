/// What `Vault.accessLog` read: the entries of every batch that opened, in order, and a problem
/// for each that did not (never skipped in silence).
public struct AccessLogReading: Sendable {
    public let entries: [AccessLogEntry]
    public let problems: [IntegrityProblem]
    /// The newest batch read (or, when none was, the `afterSequence` asked for): what a reader
    /// that follows the log asks after next.
    public let lastSequence: Int64?
    /// Whether the vault has members: its log says who signed each entry.
    public let hasMembers: Bool

    public init(entries: [AccessLogEntry], problems: [IntegrityProblem], lastSequence: Int64?, hasMembers: Bool) {
        self.entries = entries
        self.problems = problems
        self.lastSequence = lastSequence
        self.hasMembers = hasMembers
    }
}
