/// The rules attached to one path. It governs that path and everything below it, up to the
/// next rule set further down: the nearest rule set decides alone, nothing is merged from the
/// ones above it. A rule set without rules admits no process.
public struct RuleSet: Hashable, Sendable {
    public let path: VaultPath
    public let rules: [AccessRule]

    public init(path: VaultPath, rules: [AccessRule]) {
        self.path = path
        self.rules = rules
    }
}
