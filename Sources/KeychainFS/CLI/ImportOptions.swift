import ArgumentParser
import Support
import VaultCore

/// What every `import` shares: the vault, `--replace`, and storing the entries in one transaction.
struct ImportOptions: ParsableArguments {
    @OptionGroup var vault: VaultOptions
    @Flag(help: "Replace existing items (their content, attributes, label and rules); without it an existing item fails the import.")
    var replace = false

    /// Stores `entries` as one transaction, with a progress bar on a terminal; when one entry
    /// fails, the failure names it and says that nothing was imported.
    func store(_ entries: [PortableEntry], in vault: Vault) throws(CommandFailure) {
        var bar = ProgressBar("import", total: entries.count)
        do {
            try vault.importEntries(entries, replacing: replace) { bar.update($0) }
        } catch {
            bar.finish()
            throw CommandFailure(message: error.description, status: ExitStatus.code(for: error.error))
        }
        bar.finish()
        let items = entries.count { $0.kind == .item }
        Terminal.printInfo("imported \(items) item\(items == 1 ? "" : "s")")
    }
}
