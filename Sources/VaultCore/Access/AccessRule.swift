/// One principal admitted to a path and what it may do there.
public struct AccessRule: Hashable, Sendable, CustomStringConvertible {
    public let principal: Principal
    /// Reading items and listing dictionaries only: no create, write, truncate, unlink, rename
    /// or attribute change.
    public let readOnly: Bool
    /// The user is asked before the principal gets the access (see the daemon's confirmation
    /// broker); without a way to ask, the principal is refused.
    public let confirm: Bool

    public init(_ principal: Principal, readOnly: Bool = false, confirm: Bool = false) {
        self.principal = principal
        self.readOnly = readOnly
        self.confirm = confirm
    }

    public func permits(_ access: Access) -> Bool {
        !readOnly || access != .write
    }

    public var description: String {
        principal.description + (readOnly ? " --read-only" : "") + (confirm ? " --confirm" : "")
    }
}
