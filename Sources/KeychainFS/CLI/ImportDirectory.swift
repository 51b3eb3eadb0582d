import ArgumentParser
import Support
import VaultCore

struct ImportDirectory: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dir",
        abstract: "Import a directory: each file becomes an item with its exact bytes, each subdirectory a dictionary.",
        discussion: "Symbolic links and special files are not followed: each is named on standard error and left out."
    )

    @OptionGroup var options: ImportOptions
    @Option(help: ArgumentHelp("Put the items in this dictionary (default: the root).", valueName: "DICT")) var into: String = ""
    @Argument(help: "The directory.") var directory: String

    func run() throws {
        try reportingFailures { () throws(CommandFailure) in
            let base = try CommandFailure.vault { () throws(VaultError) in try VaultPath(into) }
            let found = try CommandFailure.vault { () throws(VaultError) in try DirectoryWalk.walk(directory, skippingHidden: false) }
            let vault = try CommandFailure.vault { () throws(VaultError) in try options.vault.openVault() }
            var entries: [PortableEntry] = []
            if !base.isRoot { entries.append(PortableEntry(dictionary: base)) }
            for file in found {
                let path = VaultPath(components: base.components + file.components)
                switch file.kind {
                case .directory:
                    entries.append(PortableEntry(dictionary: path))
                case .file:
                    entries.append(try CommandFailure.vault { () throws(VaultError) in
                        PortableEntry(item: path, content: try DirectoryWalk.read(file.path, limit: vault.itemSizeLimit))
                    })
                case .other:
                    Terminal.printError("\(Terminal.printable(file.path)): not a regular file or directory; left out")
                }
            }
            try options.store(entries, in: vault)
        }
    }
}
