import ArgumentParser
import VaultCore

struct MakeDictionary: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "mkdir", abstract: "Create a dictionary.")

    @OptionGroup var vault: VaultOptions
    @Flag(name: .short, help: "Create missing parents; no error if it exists.") var parents = false
    @Argument(help: "Dictionary path.") var path: String

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let target = try VaultPath(path)
            try vault.session().createDictionary(at: target, withIntermediates: parents)
        }
    }
}
