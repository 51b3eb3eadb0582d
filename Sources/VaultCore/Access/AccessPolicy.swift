/// Every rule set of a vault, by path, and the decisions they make.
///
/// A path is governed by the nearest rule set at or above it; a path with none above it is
/// open to every process of the mounting user. Paths compare by their names' bytes.
///
/// Decisions cost nothing where no rule can apply: `decide` finds the governing rule set
/// first (a walk down the path's names, or nothing at all for a vault without rules) and reads
/// /proc only when there is one, and only what its principals need.
public struct AccessPolicy: Sendable {
    /// The rule sets as a tree of names, so that finding the nearest one costs one hash per
    /// component of the path rather than one per ancestor path.
    private struct Node: Sendable {
        var ruleSet: RuleSet?
        var children: [ItemName: Node] = [:]
    }

    private var root = Node()
    /// Rule sets in the order given, for listing.
    public private(set) var ruleSets: [RuleSet] = []

    public static let empty = AccessPolicy([])

    /// Rules given twice for one path form one rule set, in the order given.
    public init(_ rules: [(VaultPath, [AccessRule])]) {
        var order: [VaultPath] = []
        var byPath: [VaultPath: [AccessRule]] = [:]
        for (path, pathRules) in rules {
            if byPath[path] == nil { order.append(path) }
            byPath[path, default: []] += pathRules
        }
        for path in order {
            let set = RuleSet(path: path, rules: byPath[path]!)
            ruleSets.append(set)
            AccessPolicy.insert(set, components: path.components[...], into: &root)
        }
    }

    public init(ruleSets: [RuleSet]) {
        self.init(ruleSets.map { ($0.path, $0.rules) })
    }

    private static func insert(_ set: RuleSet, components: ArraySlice<ItemName>, into node: inout Node) {
        guard let first = components.first else {
            node.ruleSet = set
            return
        }
        insert(set, components: components.dropFirst(), into: &node.children[first, default: Node()])
    }

    public var hasAnyRules: Bool { !ruleSets.isEmpty }

    /// The rule set that governs `path`: the nearest at or above it.
    public func ruleSet(governing path: VaultPath) -> RuleSet? {
        guard hasAnyRules else { return nil }
        var node = root
        var nearest = node.ruleSet
        for name in path.components {
            guard let child = node.children[name] else { break }
            node = child
            nearest = node.ruleSet ?? nearest
        }
        return nearest
    }

    /// Whether a rule set governs `path`; if not, every process of the mounting user may do
    /// anything there and a caller need not ask who it is.
    public func isRuled(_ path: VaultPath) -> Bool {
        ruleSet(governing: path) != nil
    }

    /// The paths strictly below `path` that have rule sets of their own. Renaming or removing
    /// `path` moves or removes them too, so the rules at each must allow it: otherwise
    /// renaming an unruled parent would carry a ruled dictionary out from under its rules.
    public func ruledPaths(below path: VaultPath) -> [VaultPath] {
        guard hasAnyRules else { return [] }
        var node = root
        for name in path.components {
            guard let child = node.children[name] else { return [] }
            node = child
        }
        var found: [VaultPath] = []
        func collect(_ node: Node) {
            for child in node.children.values {
                if let set = child.ruleSet { found.append(set.path) }
                collect(child)
            }
        }
        collect(node)
        return found
    }

    /// The decision for `identity` doing `access` at `path`. The governing rule set's rules
    /// that match the process are considered together: one that permits the access without
    /// confirmation allows it; else one that permits it with confirmation asks; else the
    /// process is refused (read-only, or admitted by no rule).
    public func decide(path: VaultPath, identity: ProcessIdentity, access: Access) -> AccessDecision {
        guard let set = ruleSet(governing: path) else { return .allow }
        var files = FileIdentityCache()
        let matching = set.rules.filter { $0.principal.matches(identity, files: &files) }
        let permitting = matching.filter { $0.permits(access) }
        if permitting.contains(where: { !$0.confirm }) { return .allow }
        if let rule = permitting.first { return .confirm(rule) }
        let executable = identity.executable?.path, unit = identity.unit
        return .deny(matching.isEmpty ? .noRuleAdmits(pid: identity.pid, executable: executable, unit: unit)
                                      : .readOnly(pid: identity.pid, executable: executable, unit: unit))
    }
}
