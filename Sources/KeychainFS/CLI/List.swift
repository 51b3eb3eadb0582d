import ArgumentParser
import Glibc
import Support
import VaultCore

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ls", abstract: "List a dictionary; dictionaries end with '/'.")

    @OptionGroup var vault: VaultOptions
    @Flag(name: .short, help: "Show size and modification time.") var long = false
    @Flag(help: "Print a JSON array of {\"name\", \"kind\", \"size\", \"modified\", \"attributes\", \"class\" (items), \"defaultClass\" (dictionaries that have one), \"label\" (when set)}.") var json = false
    @Argument(help: "Dictionary path (default: the root).") var path: String = ""

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let dictionaryPath = try VaultPath(path)
            let entries = try vault.session().list(dictionaryPath, details: json)
            if json {
                var objects: [EntryJSON] = []
                for entry in entries {
                    objects.append(EntryJSON(entry, attributes: JSONOutput.attributes(entry.attributes), label: JSONOutput.label(entry.label)))
                }
                try JSONOutput.write(objects)
                return
            }
            var output = ""
            for entry in entries {
                let name = Terminal.printable(entry.name.description) + (entry.node.kind == .dictionary ? "/" : "")
                if long {
                    let size = entry.node.kind == .dictionary ? "-" : String(entry.node.size)
                    output += String(repeating: " ", count: max(0, 9 - size.count)) + size + "  "
                        + List.format(entry.node.modified) + "  " + name + "\n"
                } else {
                    output += name + "\n"
                }
            }
            Terminal.writeAll(1, output)
        }
    }

    static func format(_ time: Timestamp) -> String {
        var seconds = time_t(time.seconds)
        var parts = tm()
        localtime_r(&seconds, &parts)
        var text = [CChar](repeating: 0, count: 32)
        strftime(&text, text.count, "%Y-%m-%d %H:%M:%S", &parts)
        return text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}
