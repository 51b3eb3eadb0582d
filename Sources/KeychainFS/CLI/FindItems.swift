import ArgumentParser
import Support
import VaultCore

struct FindItems: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find",
        abstract: "Print the path of every item whose attributes include all of NAME=VALUE ..., one per line, sorted.",
        discussion: "Exits with status \(ExitStatus.notFound) when no item matches."
    )

    @OptionGroup var vault: VaultOptions
    @Flag(help: "Print a JSON array of {\"path\", \"attributes\"}.") var json = false
    @Argument(help: "NAME=VALUE pairs, all of which must match.") var pairs: [String]

    func validate() throws {
        if pairs.isEmpty { throw ValidationError("give at least one NAME=VALUE") }
    }

    func run() throws {
        var matched = false
        try reportingErrors { () throws(VaultError) in
            let wanted = try AttributeArgument.parse(pairs)
            let found = try vault.session().find(wanted, withAttributes: json)
            if json {
                try JSONOutput.write(found.map { ItemJSON(path: $0.path.description, attributes: JSONOutput.attributes($0.attributes)) })
            } else if !found.isEmpty {
                Terminal.writeAll(1, found.map { Terminal.printable($0.path.description) + "\n" }.joined())
            }
            matched = !found.isEmpty
        }
        // Like grep: finding nothing is a status of its own, with the listing (or `[]`) still printed.
        guard matched else {
            Terminal.printError("no item has all of these attributes")
            throw ExitCode(ExitStatus.notFound.rawValue)
        }
    }
}
