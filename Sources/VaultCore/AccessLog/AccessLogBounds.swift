/// How much access log a vault keeps: batches older than `days` go, then the oldest while more
/// than `entries` entries are kept. Either at 0 turns logging off.
public struct AccessLogBounds: Sendable, Equatable {
    public static let defaultDays = 30
    public static let defaultEntries = 100_000
    public static let `default` = AccessLogBounds(days: defaultDays, entries: defaultEntries)

    public let days: Int
    public let entries: Int

    public init(days: Int, entries: Int) {
        precondition(days >= 0 && entries >= 0, "negative access log bound")
        self.days = days
        self.entries = entries
    }

    public var isEnabled: Bool { days > 0 && entries > 0 }
}
