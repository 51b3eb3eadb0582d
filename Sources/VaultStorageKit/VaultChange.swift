/// What another session committed to a vault, as a change listener hears of it.
public enum VaultChange: Equatable, Sendable {
    /// These nodes changed: their attributes, content or rules, their place (made, removed,
    /// moved), or, for a dictionary, its entries.
    case nodes(Set<NodeID>)
    /// Anything may have changed: too much to name, or notices missed.
    case everything

    /// Both at once: one notice naming everything absorbs the others.
    public func merged(with other: VaultChange) -> VaultChange {
        switch (self, other) {
        case (.nodes(let a), .nodes(let b)): return .nodes(a.union(b))
        default: return .everything
        }
    }
}
