/// What an access policy says about one request.
public enum AccessDecision: Hashable, Sendable {
    case allow
    case deny(AccessDenial)
    /// Allowed if the user says yes: ask about this rule (answers are remembered per process
    /// and rule).
    case confirm(AccessRule)
}
