import Daemon

/// One rule set of `rules --json`: the ruled path and its rules.
struct RuleSetJSON: Encodable {
    let path: String
    let rules: [Rule]

    /// One rule: `exe` (with `fileChanged` and `fileRecorded`) or `unit`, and its flags.
    struct Rule: Encodable {
        var exe: String?
        var unit: String?
        let readOnly: Bool
        let confirm: Bool
        /// For `exe`: whether the file at the path is no longer the one the rule was made for.
        var fileChanged: Bool?
        /// For `exe`: false for a rule made before rules recorded the file's size and times,
        /// which a rewrite in place does not change (`allow` again records them).
        var fileRecorded: Bool?

        init(_ rule: RuleSummary) {
            exe = rule.executable
            unit = rule.unit
            if rule.executable != nil {
                fileChanged = rule.fileChanged
                fileRecorded = rule.fileRecorded
            }
            readOnly = rule.readOnly
            confirm = rule.confirm
        }
    }
}
