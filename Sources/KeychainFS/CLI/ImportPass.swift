import ArgumentParser
import Glibc
import Support
import VaultCore

struct ImportPass: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pass",
        abstract: "Import a pass store: each FILE.gpg becomes the item FILE, decrypted with your gpg, byte for byte.",
        discussion: "Dictionaries follow the store's directories; hidden files and directories (.git, .gpg-id) are skipped."
    )

    @OptionGroup var options: ImportOptions
    @Option(help: ArgumentHelp("Put the items in this dictionary (default: the root).", valueName: "DICT")) var into: String = ""
    @Argument(help: "The store (default: $PASSWORD_STORE_DIR, else ~/.password-store).") var directory: String?

    func run() throws {
        try reportingFailures { () throws(CommandFailure) in
            let top = directory ?? ImportPass.defaultStore
            let base = try CommandFailure.vault { () throws(VaultError) in try VaultPath(into) }
            let found = try CommandFailure.vault { () throws(VaultError) in try DirectoryWalk.walk(top, skippingHidden: true) }
            let vault = try CommandFailure.vault { () throws(VaultError) in try options.vault.openVault() }
            var entries: [PortableEntry] = []
            var bar = ProgressBar("decrypt", total: found.count)
            for (index, file) in found.enumerated() {
                bar.update(index)
                guard file.kind == .file, let last = file.components.last, last.description.hasSuffix(".gpg") else { continue }
                let name = String(last.description.dropLast(4))
                let entry = try CommandFailure.vault { () throws(VaultError) in
                    guard !name.isEmpty else { throw .invalidArgument("\(file.path): no name before .gpg") }
                    let path = VaultPath(components: base.components + file.components.dropLast() + [try ItemName(name)])
                    return PortableEntry(item: path, content: try GPGDecrypt.decrypt(file.path, limit: vault.itemSizeLimit))
                }
                entries.append(entry)
            }
            bar.finish()
            try options.store(entries, in: vault)
        }
    }

    private static var defaultStore: String {
        if let dir = getenv("PASSWORD_STORE_DIR"), dir.pointee != 0 { return String(cString: dir) }
        return (getenv("HOME").map { String(cString: $0) } ?? "") + "/.password-store"
    }
}
