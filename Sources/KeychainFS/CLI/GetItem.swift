import ArgumentParser
import VaultCore

struct GetItem: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "get", abstract: "Write an item's exact bytes to standard output.")

    @OptionGroup var vault: VaultOptions
    @Argument(help: "Item path.") var path: String

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let itemPath = try VaultPath(path)
            let content = try vault.openVault().read(itemPath)
            guard content.withUnsafeBytes({ Terminal.writeAll(1, $0) }) else {
                throw .storageFailure("cannot write to standard output")
            }
        }
    }
}
