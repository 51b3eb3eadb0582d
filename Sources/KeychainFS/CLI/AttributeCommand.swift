import ArgumentParser
import Support
import VaultCore

struct AttributeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "attr",
        abstract: "List, print, set or remove the attributes of an item or dictionary.",
        discussion: """
            keychainfs attr PATH                  lists NAME=VALUE lines, sorted by name (--json: an object)
            keychainfs attr PATH NAME             prints the value's exact bytes
            keychainfs attr PATH NAME=VALUE       sets it (created or replaced)
            keychainfs attr PATH --remove NAME    removes it
            Names are given without the mount's `user.` prefix. A VALUE on the command line is visible to other processes.
            """
    )

    @OptionGroup var vault: VaultOptions
    @Flag(help: "Print the listing as JSON.") var json = false
    @Option(name: .customLong("remove"), help: ArgumentHelp("Remove the attribute NAME.", valueName: "NAME")) var removing: String?
    @Argument(help: "Item or dictionary path.") var path: String
    @Argument(help: "NAME to print, or NAME=VALUE to set.") var attribute: String?

    func validate() throws {
        if removing != nil && attribute != nil { throw ValidationError("give NAME, NAME=VALUE or --remove NAME, not two of them") }
        if json && (removing != nil || attribute != nil) { throw ValidationError("--json goes with the listing form only") }
    }

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let target = try VaultPath(path)
            if let removing {
                let name = try AttributeName(removing)
                try vault.session().removeAttribute(name, at: target)
            } else if let attribute, attribute.utf8.contains(UInt8(ascii: "=")) {
                let parsed = try AttributeArgument.parse(attribute)
                try vault.session().setAttribute(parsed.name, to: parsed.value, at: target)
            } else if let attribute {
                let value = try vault.session().attribute(try AttributeName(attribute), at: target)
                guard value.withUnsafeBytes({ Terminal.writeAll(1, $0) }) else { throw .storageFailure("cannot write to standard output") }
            } else {
                let attributes = try vault.session().attributes(at: target)
                if json {
                    try JSONOutput.write(ItemJSON(path: target.description, attributes: JSONOutput.attributes(attributes)))
                } else {
                    for attribute in attributes {
                        Terminal.writeAll(1, Terminal.printable(attribute.name.description) + "=")
                        guard attribute.value.withUnsafeBytes({ Terminal.writeAll(1, $0) }) else {
                            throw .storageFailure("cannot write to standard output")
                        }
                        Terminal.writeAll(1, "\n")
                    }
                }
            }
        }
    }
}
