/// Who signed the batch an access log entry came in (a team log, format 11).
public struct LoggedMember: Sendable, Equatable {
    /// The member's name, as the batch names them.
    public let name: String
    /// true: a member of that name holds the slot whose key signed it. false: no member has that
    /// name now (they were removed): the signature holds under the key the batch names, which no
    /// slot vouches for any more.
    public let isMember: Bool

    public init(name: String, isMember: Bool) {
        self.name = name
        self.isMember = isMember
    }
}
