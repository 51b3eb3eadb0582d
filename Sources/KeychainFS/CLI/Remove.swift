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
            try vault.openVault().remove(target, recursive: recursive)
        }
    }
}

struct MakeDictionary: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "mkdir", abstract: "Create a dictionary.")

    @OptionGroup var vault: VaultOptions
    @Flag(name: .short, help: "Create missing parents; no error if it exists.") var parents = false
    @Argument(help: "Dictionary path.") var path: String

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let target = try VaultPath(path)
            try vault.openVault().makeDictionary(at: target, withIntermediates: parents)
        }
    }
}

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
            try vault.openVault().move(from, to: to)
        }
    }
}
