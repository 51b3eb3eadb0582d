/// What the access log holds, as counted by the storage: readable without keys, as the file
/// shows it to anyone.
public struct AccessLogSummary: Sendable, Equatable {
    public let batches: Int
    public let entries: Int
    /// The newest batch's sequence; nil while the log is empty.
    public let lastSequence: Int64?

    package init(batches: Int, entries: Int, lastSequence: Int64?) {
        self.batches = batches
        self.entries = entries
        self.lastSequence = lastSequence
    }
}
