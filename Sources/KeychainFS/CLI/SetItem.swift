import ArgumentParser
import Support
import VaultCore

struct SetItem: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract: "Store an item: VALUE, or standard input byte for byte, and any --attr. Missing dictionaries are created.",
        discussion: "A VALUE on the command line is visible to other processes; prefer standard input for real secrets."
    )

    @OptionGroup var vault: VaultOptions
    @Argument(help: "Item path, such as app/token.") var path: String
    @Argument(help: "The value (default: standard input).") var value: String?
    @Option(name: .customLong("attr"), help: ArgumentHelp("An attribute to set with the value, in the same transaction (repeatable).", valueName: "NAME=VALUE"))
    var attributes: [String] = []
    @Option(name: .customLong("class"), help: ArgumentHelp("The item's accessibility class: when-unlocked, after-first-unlock or this-device-only (default: a new item takes its dictionaries' nearest default, else when-unlocked; a replaced one keeps its class).", valueName: "CLASS"))
    var accessibility: String?

    func validate() throws {
        if value == nil && vault.passphraseFromStandardInput {
            throw ValidationError("standard input cannot carry both the passphrase and the value")
        }
    }

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let itemPath = try VaultPath(path)
            let itemAttributes = try AttributeArgument.parse(attributes)
            let itemClass = try accessibility.map { (name) throws(VaultError) in try AccessibilityClass(name: name) }
            // A class given changes the item's class, which proves the owner: the passphrase.
            let direct = itemClass == nil ? nil : try vault.openVault()
            let opened: any VaultSession
            if let direct { opened = direct } else { opened = try vault.session() }
            let limit = try opened.itemSizeLimit()
            var content = try SecureBuffer(capacity: 0)
            if var value {
                try content.reserve(value.utf8.count)
                value.withUTF8 { bytes in try! content.append(UnsafeRawBufferPointer(bytes)) }  // fits: reserved above
            } else if try SecretInput.read(0, into: &content, limit: limit) == .overLimit {
                let size = content.count + (try drainCount(0))
                throw .itemTooLarge(size: size, limit: limit)
            }
            if let direct {
                try direct.store(content, at: itemPath, attributes: itemAttributes, accessibility: itemClass)
            } else {
                try opened.store(content, at: itemPath, attributes: itemAttributes)
            }
            try opened.logged(.write, at: itemPath)
        }
    }

    /// Counts (and discards, wiped) the rest of an oversized input, to report its size.
    private func drainCount(_ fd: Int32) throws(VaultError) -> Int {
        var scratch = try SecureBuffer(capacity: 65536)
        var total = 0
        while true {
            scratch.setCount(0)
            guard try SecretInput.read(fd, into: &scratch, limit: 65535) == .overLimit else { return total + scratch.count }
            total += scratch.count
        }
    }
}
