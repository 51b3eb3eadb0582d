/// What an access log entry records: an access to a path, or an event of the vault.
public enum LoggedAccess: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    case read = 1
    case write = 2
    case list = 3
    case lock = 4
    case unlock = 5
    case ruleChange = 6
    case classChange = 7
    case confirmation = 8
    /// Format 11: a member added or removed (`AccessLogEntry.aboutMember` names them).
    case memberAddition = 9
    case memberRemoval = 10

    public var description: String {
        switch self {
        case .read: "read"
        case .write: "write"
        case .list: "list"
        case .lock: "lock"
        case .unlock: "unlock"
        case .ruleChange: "rule-change"
        case .classChange: "class-change"
        case .confirmation: "confirmation"
        case .memberAddition: "member-add"
        case .memberRemoval: "member-remove"
        }
    }

    /// The access an access policy decided on.
    public init(_ access: Access) {
        switch access {
        case .read: self = .read
        case .write: self = .write
        case .list: self = .list
        }
    }
}
