import ArgumentParser
import VaultCore

struct Move: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mv",
        abstract: "Rename or move an item or dictionary (into DST if DST is a dictionary); contents are not re-encrypted."
    )

    @OptionGroup var vault: VaultOptions
    @Argument(help: "Source path.") var source: String
    @Argument(help: "Destination path.") var destination: String

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let from = try VaultPath(source), to = try VaultPath(destination)
            let opened = try vault.session()
            try opened.move(from, to: to)
            try opened.logged(.write, at: to)
        }
    }
}
