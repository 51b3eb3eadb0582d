import ArgumentParser
import Support
import VaultCore

struct LabelCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "label",
        abstract: "Print, set or clear the label of an item or dictionary.",
        discussion: """
            keychainfs label PATH            prints the label's exact bytes (an error when there is none)
            keychainfs label PATH LABEL      sets it
            keychainfs label PATH --clear    removes it
            The label is what Secret Service clients show; it is not an attribute and is not searched. \
            In the mount it is the extended attribute keychainfs.label. A LABEL on the command line is visible to other processes.
            """
    )

    @OptionGroup var vault: VaultOptions
    @Flag(help: "Remove the label.") var clear = false
    @Flag(help: "Print {\"path\", \"label\"} (a string, {\"base64\": ...} when not UTF-8, or null when there is none).")
    var json = false

    /// `label --json`.
    struct JSON: Encodable {
        let path: String
        let label: AttributeValue?

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(path, forKey: .path)
            try container.encode(label, forKey: .label)  // null, not left out: "no label" is the answer
        }

        private enum CodingKeys: String, CodingKey { case path, label }
    }
    @Argument(help: "Item or dictionary path.") var path: String
    @Argument(help: "The new label.") var label: String?

    func validate() throws {
        if clear && label != nil { throw ValidationError("give LABEL or --clear, not both") }
        if json && (clear || label != nil) { throw ValidationError("--json goes with the printing form only") }
    }

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            let target = try VaultPath(path)
            if clear {
                try vault.session().setLabel(nil, at: target)
            } else if let label {
                var value = try SecureBuffer(capacity: label.utf8.count)
                Array(label.utf8).withUnsafeBytes { raw in try! value.append(raw) }  // fits: the capacity is its count
                try vault.session().setLabel(consume value, at: target)
            } else if json {
                try JSONOutput.write(JSON(path: target.description, label: JSONOutput.label(try vault.session().label(at: target))))
            } else {
                guard let value = try vault.session().label(at: target) else {
                    throw .noSuchAttribute("\(target), label")
                }
                guard value.withUnsafeBytes({ Terminal.writeAll(1, $0) }) else { throw .storageFailure("cannot write to standard output") }
            }
        }
    }
}
