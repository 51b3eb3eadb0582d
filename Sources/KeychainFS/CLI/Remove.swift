import ArgumentParser
import VaultCore

struct Remove: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rm", abstract: "Remove an item or an empty dictionary.")

    @OptionGroup var vault: VaultOptions
    @Flag(name: .short, help: "Remove a dictionary and everything in it.") var recursive = false
    @Argument(help: "Path to remove.") var path: String

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let target = try VaultPath(path)
            let opened = try vault.session()
            try opened.remove(target, recursive: recursive)
            try opened.logged(.write, at: target)
        }
    }
}
