import VaultCore

/// One rule set of `rules --json`: the ruled path and its rules.
struct RuleSetJSON: Encodable {
    let path: String
    let rules: [Rule]

    /// One rule: `exe` (with `fileChanged`) or `unit`, and its flags.
    struct Rule: Encodable {
        var exe: String?
        var unit: String?
        let readOnly: Bool
        let confirm: Bool
        /// For `exe`: whether the file at the path is no longer the one the rule was made for.
        var fileChanged: Bool?

        init(_ rule: AccessRule) {
            switch rule.principal {
            case .executable(let path, _, _):
                exe = path
                fileChanged = rule.principal.fileChanged
            case .unit(let name):
                unit = name
            }
            readOnly = rule.readOnly
            confirm = rule.confirm
        }
    }
}
