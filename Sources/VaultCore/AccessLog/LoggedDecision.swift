/// What was decided about a logged access.
public enum LoggedDecision: Sendable, Equatable, CustomStringConvertible {
    case allowed
    /// The reason names the process and rule, never the path (`AccessDenial.description`).
    case denied(reason: String)
    /// The user's answer to a confirmation command.
    case confirmed(Bool)

    public var isDenial: Bool {
        switch self {
        case .allowed, .confirmed(true): false
        case .denied, .confirmed(false): true
        }
    }

    public var description: String {
        switch self {
        case .allowed: "allowed"
        case .denied(let reason): "denied (\(reason))"
        case .confirmed(let yes): yes ? "confirmed" : "refused"
        }
    }
}
