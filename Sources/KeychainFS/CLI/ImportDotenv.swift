import ArgumentParser
import Support
import VaultCore

struct ImportDotenv: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dotenv",
        abstract: "Import a .env file: each KEY=VALUE becomes the item KEY holding VALUE.",
        discussion: """
            As the dotenv libraries read it: `export ` before a key is allowed; blank lines and # comments are skipped; \
            a double-quoted value may span lines and has \\n \\r \\t \\" \\\\ expanded; single-quoted and backquoted \
            values are taken as written; an unquoted value ends at the line's end or a ` #` comment and is trimmed. \
            No ${VAR} expansion. A key given twice keeps its last value. Any other line is an error naming its number.
            """
    )

    @OptionGroup var options: ImportOptions
    @Option(help: ArgumentHelp("Put the items in this dictionary (default: the root).", valueName: "DICT")) var into: String = ""
    @Argument(help: "The .env file.") var file: String

    func run() throws {
        try reportingFailures { () throws(CommandFailure) in
            let base = try CommandFailure.vault { () throws(VaultError) in try VaultPath(into) }
            let vault = try CommandFailure.vault { () throws(VaultError) in try options.vault.openVault() }
            let entries = try CommandFailure.vault { () throws(VaultError) -> [PortableEntry] in
                // The whole file is secrets: it is read into locked memory and parsed there.
                let text = try DirectoryWalk.read(file, limit: Vault.maximumItemSizeLimit)
                return try text.withUnsafeBytes { (bytes) throws(VaultError) in try DotenvParser.parse(bytes, file: file, into: base) }
            }
            try options.store(entries, in: vault)
        }
    }
}
