import ArgumentParser
import Support
import VaultCore

struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write the vault to an encrypted archive, for `keychainfs import archive`.",
        discussion: """
            The archive holds every dictionary and item with its attributes, label, content type, class and rules; \
            this-device-only items are never exported. It is encrypted with libsodium's secretstream \
            (XChaCha20-Poly1305) under a key derived with Argon2id from its own passphrase, asked twice on the \
            terminal unless --archive-passphrase-file is given. An existing FILE is not overwritten.
            """
    )

    @OptionGroup var vault: VaultOptions
    @Option(name: .customLong("to"), help: ArgumentHelp("The archive to create.", valueName: "FILE")) var archive: String
    @Option(name: .customLong("archive-passphrase-file"),
            help: ArgumentHelp("Read the archive's passphrase from FILE (default: ask on the terminal).", valueName: "FILE"))
    var archivePassphraseFile: String?
    @Option(help: "The archive key's Argon2id cost: interactive, moderate or sensitive.") var kdf: KDFPreset = .moderate

    func validate() throws {
        if archivePassphraseFile == "-" && vault.passphraseFromStandardInput {
            throw ValidationError("standard input cannot carry both passphrases")
        }
    }

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let opened = try vault.session()
            let passphrase = try SecretInput.passphrase(file: archivePassphraseFile, command: nil,
                                                        prompt: "Archive passphrase: ", confirm: true)
            var writer = try ArchiveWriter(creating: archive, passphrase: passphrase, parameters: kdf.parameters)
            var bar: ProgressBar? = nil
            var done = 0
            let skipped = try opened.exportEntries(excluding: [.thisDeviceOnly]) { (entry, total) throws(VaultError) in
                if bar == nil, let total { bar = ProgressBar("export", total: total) }
                try writer.append(entry)
                done += 1
                bar?.update(done)
            }
            try writer.finish()
            // One entry for the whole vault (its root), which an export reads.
            try opened.logged(.read, at: .root)
            bar?.finish()
            Terminal.printInfo("exported \(done) entries to \(archive)"
                + (skipped > 0 ? "; \(skipped) this-device-only item\(skipped == 1 ? "" : "s") left out" : ""))
        }
    }
}
