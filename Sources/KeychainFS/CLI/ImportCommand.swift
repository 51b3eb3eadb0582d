import ArgumentParser

struct ImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import secrets from a pass store, a .env file, a directory, a keychainfs archive, the running Secret Service or a password manager's CSV export.",
        discussion: """
            An import is one transaction: every entry is stored, or, when one fails, none is and the error names it \
            (secret-service and csv: one per 100 items, and a second run brings the rest without doubles). \
            An existing item is never replaced without --replace.
            """,
        subcommands: [ImportPass.self, ImportDotenv.self, ImportDirectory.self, ImportArchive.self, ImportSecretService.self, ImportCSV.self]
    )
}
