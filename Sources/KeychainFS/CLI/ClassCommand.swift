import ArgumentParser
import Support
import VaultCore

struct ClassCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "class",
        abstract: "Print or change an item's accessibility class, or a dictionary's default class.",
        discussion: """
            keychainfs class ITEM              prints its class
            keychainfs class ITEM CLASS        changes it (the content is sealed again under that class's key)
            keychainfs class DICTIONARY        prints its default class for items created below it
            keychainfs class DICTIONARY CLASS  sets that default (`inherit` removes it: the next default up applies)
            Classes: when-unlocked (the default), after-first-unlock (readable and writable while the mount is
            locked, until it is unmounted), this-device-only (readable only with this machine's host key,
            $KEYCHAINFS_HOST_KEY, else $XDG_STATE_HOME/keychainfs/host.key).
            """
    )

    static let inherit = "inherit"

    @OptionGroup var vault: VaultOptions
    @Flag(help: "Print {\"path\", \"kind\", \"class\" (an item's), \"defaultClass\" (a dictionary's own, null for none), \"effectiveDefaultClass\" (what items created in a dictionary get)}.")
    var json = false
    @Argument(help: "Item or dictionary path.") var path: String
    @Argument(help: "The class to set.") var newClass: String?

    /// `class --json`.
    struct JSON: Encodable {
        let path: String
        let kind: String
        var `class`: String?
        var defaultClass: String??
        var effectiveDefaultClass: String?
    }

    func validate() throws {
        if json && newClass != nil { throw ValidationError("--json goes with the printing form only") }
    }

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let target = try VaultPath(path)
            var chosen: AccessibilityClass? = nil
            if let newClass, newClass != ClassCommand.inherit { chosen = try AccessibilityClass(name: newClass) }
            // A change of class proves the owner: the passphrase, never a running daemon.
            if newClass != nil {
                try vault.openVault().setClass(chosen, at: target)
                return
            }
            let (node, effectiveDefault) = try vault.session().summary(at: target)
            if json {
                var output = JSON(path: target.description, kind: node.kind == .item ? "item" : "dictionary")
                if node.kind == .item {
                    output.class = node.accessibility.description
                } else {
                    output.defaultClass = .some(node.defaultClass?.description)
                    output.effectiveDefaultClass = effectiveDefault?.description
                }
                try JSONOutput.write(output)
                return
            }
            switch node.kind {
            case .item:
                Terminal.writeAll(1, node.accessibility.description + "\n")
            case .dictionary:
                if let own = node.defaultClass {
                    Terminal.writeAll(1, own.description + "\n")
                } else {
                    Terminal.writeAll(1, "\(ClassCommand.inherit) (new items get \(effectiveDefault ?? .whenUnlocked))\n")
                }
            }
        }
    }
}
