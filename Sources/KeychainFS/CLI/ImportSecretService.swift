import ArgumentParser
import DBus
import Daemon
import Glibc
import Keyring
import Support
import VaultCore

struct ImportSecretService: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "secret-service",
        abstract: "Import everything the running Secret Service holds (gnome-keyring, KWallet, KeePassXC): collections, items, labels, attributes, content types.",
        discussion: """
            Reads from whoever owns org.freedesktop.secrets on the session bus now, over an encrypted session \
            (dh-ietf1024-sha256-aes128-cbc-pkcs7; plain only if the service offers nothing else). A locked \
            collection is unlocked through the service's own prompt. The collection of the `default` alias \
            (gnome-keyring's login keyring) goes into `login`, this service's default collection; every other becomes the dictionary named \
            after its label ('/' and control characters made '_', a leading '.' made '_'; the object path's last \
            element when the label is empty), with the collection's label; each item is named after its label, \
            made unique in its dictionary with " 2", " 3", ..., as this project's Secret Service names new items. \
            An item already in that dictionary with the same label and the same attributes is the same item and is \
            not imported again (--replace stores its secret again, under its name here). Refuses a KeychainFS \
            serving this same vault.
            """
    )

    @OptionGroup var options: ImportOptions
    @Flag(name: .customLong("dry-run"), help: "List the items that would be imported (paths only, no secrets) and store nothing.")
    var dryRun = false
    @Option(help: ArgumentHelp("Put the collections' dictionaries in this dictionary (default: the root).", valueName: "DICT"))
    var into: String = ""
    @Option(name: .customLong("prompt-timeout"), help: "Seconds to wait for each of the service's unlock prompts.")
    var promptTimeout: Int = 300

    func run() throws {
        try reportingFailures { () throws(CommandFailure) in
            let base = try CommandFailure.vault { () throws(VaultError) in try VaultPath(into) }
            let bus: BusConnection
            do throws(BusError) { bus = try BusConnection.session() } catch {
                throw CommandFailure(message: error.message, status: .serviceUnavailable)
            }
            try refuseOurselves(bus)
            let vault = try CommandFailure.vault { () throws(VaultError) in try options.vault.openVault() }
            let client = try SecretServiceSource.answering { () throws(BusError) in try SecretServiceClient(bus: bus) }
            if client.algorithm == "plain" { Terminal.printError("the Secret Service offers no encrypted session: secrets cross the bus in the clear") }
            let source = try SecretServiceSource(client, below: base, promptTimeout: .seconds(promptTimeout))
            let plan = try MigrationPlan(source, vault: vault, replacing: options.replace)
            try plan.finish(dryRun: dryRun, from: source, vault: vault, replacing: options.replace)
        }
    }

    /// Importing from the service that serves this vault would copy every item onto itself
    /// (and wait on its own unlock prompt): refused, naming the process.
    private func refuseOurselves(_ bus: BusConnection) throws(CommandFailure) {
        let ownership: SecretServiceOwnership
        do throws(BusError) { ownership = try SecretServiceOwnership.query(bus) } catch {
            throw CommandFailure(message: error.message, status: .serviceUnavailable)
        }
        guard let owner = ownership.owner else {
            throw CommandFailure(message: "nobody owns org.freedesktop.secrets on the session bus: nothing to import from", status: .notFound)
        }
        guard ownership.isKeychainFS else { return }
        let process = owner.pid.map { "pid \($0)" } ?? owner.uniqueName
        let ours = options.vault.resolvedVaultPath
        guard let theirs = ownership.vault, let pid = owner.pid else {
            throw CommandFailure(message: "org.freedesktop.secrets is served by KeychainFS (\(process)) for a vault it does not name; "
                                 + "refusing to import from what may be this vault (`keychainfs export` and `import archive` copy between vaults)",
                                 status: .invalidInput)
        }
        let theirPath = theirs.hasPrefix("/") || theirs.contains("://") ? theirs : "/proc/\(pid)/cwd/" + theirs
        if Self.sameVault(ours, theirPath) {
            throw CommandFailure(message: "org.freedesktop.secrets is served by KeychainFS (\(process)) from this same vault: "
                                 + "nothing to import (stop it, or start the keyring to import from, first)", status: .invalidInput)
        }
    }

    /// The same file (device and inode), or the same URI for a PostgreSQL vault.
    private static func sameVault(_ a: String, _ b: String) -> Bool {
        if a.contains("://") || b.contains("://") { return a == b }
        var first = stat()
        var second = stat()
        guard stat(a, &first) == 0, stat(b, &second) == 0 else { return a == b }
        return first.st_dev == second.st_dev && first.st_ino == second.st_ino
    }
}
