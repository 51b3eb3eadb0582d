import ArgumentParser
import Support
import VaultCore

struct GetItem: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "get", abstract: "Write an item's exact bytes to standard output.")

    @OptionGroup var vault: VaultOptions
    @Flag(help: "Print {\"path\", \"value\", \"encoding\" (utf-8 or base64), \"attributes\", \"class\", \"label\" (when set)} instead.") var json = false
    @Argument(help: "Item path.") var path: String

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let itemPath = try VaultPath(path)
            let opened = try vault.session()
            let content = try opened.read(itemPath)
            try opened.logged(.read, at: itemPath)
            if json {
                let text = JSONOutput.text(content)
                try JSONOutput.write(ItemJSON(path: itemPath.description, value: text ?? JSONOutput.base64(content),
                                              encoding: text == nil ? "base64" : "utf-8",
                                              attributes: JSONOutput.attributes(try opened.attributes(at: itemPath)),
                                              class: try opened.summary(at: itemPath).node.accessibility.description,
                                              label: JSONOutput.label(try opened.label(at: itemPath))))
                return
            }
            guard content.withUnsafeBytes({ Terminal.writeAll(1, $0) }) else {
                throw .storageFailure("cannot write to standard output")
            }
        }
    }
}
