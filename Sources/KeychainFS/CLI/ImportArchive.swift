import ArgumentParser
import Support
import VaultCore

struct ImportArchive: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "archive",
        abstract: "Import an archive made by `keychainfs export`: items, dictionaries, attributes, labels, classes and rules.",
        discussion: """
            Every message of the archive is authenticated before anything is stored: a changed, cut or wrongly \
            unlocked archive imports nothing. An existing dictionary keeps its own attributes, label, default class \
            and rules unless --replace; an --exe rule names the file at its path on this machine.
            """
    )

    @OptionGroup var options: ImportOptions
    @Option(name: .customLong("archive-passphrase-file"),
            help: ArgumentHelp("Read the archive's passphrase from FILE (default: ask on the terminal).", valueName: "FILE"))
    var archivePassphraseFile: String?
    @Argument(help: "The archive.") var file: String

    func validate() throws {
        if archivePassphraseFile == "-" && options.vault.passphraseFromStandardInput {
            throw ValidationError("standard input cannot carry both passphrases")
        }
    }

    func run() throws {
        try reportingFailures { () throws(CommandFailure) in
            let vault = try CommandFailure.vault { () throws(VaultError) in try options.vault.openVault() }
            let entries = try ImportArchive.namingPassphrase { () throws(VaultError) -> [PortableEntry] in
                let passphrase = try SecretInput.passphrase(file: archivePassphraseFile, command: nil,
                                                            prompt: "Archive passphrase: ", confirm: false)
                var reader = try ArchiveReader(opening: file, passphrase: passphrase)
                var entries: [PortableEntry] = []
                while let entry = try reader.next(seen: entries.count) { entries.append(entry) }
                return entries
            }
            try options.store(entries, in: vault)
        }
    }

    /// A first message that fails is the archive passphrase's fault, or a change to the archive: the vault's passphrase was right.
    private static func namingPassphrase(_ body: () throws(VaultError) -> [PortableEntry]) throws(CommandFailure) -> [PortableEntry] {
        do {
            return try body()
        } catch .wrongPassphrase {
            throw CommandFailure(message: "wrong archive passphrase (or the archive was changed); nothing was imported", status: .wrongPassphrase)
        } catch {
            throw CommandFailure(error)
        }
    }
}
