/// The newest batch of an access log: its sequence and its digest (a chained batch's).
struct LogHead: Sendable, Equatable {
    let sequence: Int64
    let digest: [UInt8]
}
