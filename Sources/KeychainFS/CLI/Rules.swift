import ArgumentParser
import Support
import VaultCore

struct Rules: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the access rules at and below a path: each ruled path, then its rules.",
        discussion: """
            An --exe rule whose file was replaced or removed since the rule was made is marked: it now admits \
            whatever file is at that path. So is one whose file was rewritten in place (its size or times \
            changed, the inode kept): it admits nothing until allowed again. A rule made before rules recorded \
            the file's size and times is marked too: a rewrite in place would go unnoticed; allow it again.
            """
    )

    @OptionGroup var vault: VaultOptions
    @Flag(help: "Print a JSON array of {\"path\", \"rules\": [{\"exe\" or \"unit\", \"readOnly\", \"confirm\", \"fileChanged\", \"fileRecorded\"}]}.")
    var json = false
    @Argument(help: "Item or dictionary path (default: the root).") var path: String = ""

    static let replacedNote = "(the file at this path was replaced, removed or rewritten since the rule was made)"
    static let unrecordedNote = "(made before rules recorded the file's size and times: allow it again)"

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let sets = try vault.session().ruleSummaries(at: try VaultPath(path))
            if json {
                try JSONOutput.write(sets.map { RuleSetJSON(path: $0.path.description, rules: $0.rules.map(RuleSetJSON.Rule.init)) })
                return
            }
            var output = ""
            for (ruled, rules) in sets {
                output += Terminal.printable(ruled.description) + "\n"
                for rule in rules {
                    output += "    " + Terminal.printable(rule.text) + (rule.fileChanged ? "  " + Rules.replacedNote : "")
                        + (rule.executable != nil && !rule.fileRecorded ? "  " + Rules.unrecordedNote : "") + "\n"
                }
            }
            Terminal.writeAll(1, output)
        }
    }
}
