import ArgumentParser
import Glibc
import Support
import VaultCore

struct ImportCSV: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "csv",
        abstract: "Import a password manager's CSV export: KeePassXC, Bitwarden, 1Password or Chromium.",
        discussion: """
            The file is read into locked memory and parsed there (RFC 4180: quoted fields, doubled quotes, line \
            breaks inside quotes, CRLF, a byte order mark). Each row becomes an item named after its title (made \
            unique with " 2", " 3", ...) holding the password, with the attributes username, url and notes (Bitwarden: \
            fields too; a Bitwarden secure note holds its notes); a TOTP secret becomes the item "TITLE TOTP". Items go \
            into the dictionary --into (default: KeePassXC, Bitwarden, 1Password or Chromium), groups and folders \
            into dictionaries below it. An item already there with the same title and attributes is not imported \
            again. A malformed file imports nothing; the rest goes in transactions of 100 items.

            Delete the export afterwards: --remove-file unlinks it once the import is stored. Overwriting it first \
            (shred) does not reliably reach the old blocks on journaling or copy-on-write file systems or SSDs; \
            keep such exports on an encrypted disk or a tmpfs.
            """
    )

    @OptionGroup var options: ImportOptions
    @Option(help: "The exporting program: keepassxc, bitwarden, 1password or chromium.") var format: CSVFormat
    @Flag(name: .customLong("dry-run"), help: "List the items that would be imported (paths only, no secrets) and store nothing.")
    var dryRun = false
    @Flag(name: .customLong("remove-file"), help: "Remove the export once its items are stored.")
    var removeFile = false
    @Option(help: ArgumentHelp("Put the items in this dictionary (default: named after the format).", valueName: "DICT"))
    var into: String?
    @Argument(help: "The CSV file.") var file: String

    func run() throws {
        try reportingFailures { () throws(CommandFailure) in
            let base = try CommandFailure.vault { () throws(VaultError) in try VaultPath(into ?? format.defaultDictionary) }
            // The whole file is secrets: read into locked memory and parsed before the vault is opened,
            // so a malformed file fails before a passphrase is asked.
            let source = try CommandFailure.vault { () throws(VaultError) -> CSVSource in
                let text = try DirectoryWalk.read(file, limit: Vault.maximumItemSizeLimit)
                let csv = try text.withUnsafeBytes { (bytes) throws(VaultError) in try CSVParser.parse(bytes, file: file) }
                return try CSVSource(csv, format: format, below: base, file: file)
            }
            let vault = try CommandFailure.vault { () throws(VaultError) in try options.vault.openVault() }
            let plan = try MigrationPlan(source, vault: vault, replacing: options.replace)
            try plan.finish(dryRun: dryRun, from: source, vault: vault, replacing: options.replace)
            guard !dryRun else { return }
            if removeFile {
                guard unlink(file) == 0 else {
                    throw CommandFailure(message: "\(file): imported, but cannot remove it: \(String(cString: strerror(errno)))", status: .failure)
                }
                Terminal.printInfo("removed \(Terminal.printable(file))")
            } else {
                Terminal.printInfo("the export holds every secret in the clear: delete it (rm \(Terminal.printable(file)), or --remove-file next time)")
            }
        }
    }
}
