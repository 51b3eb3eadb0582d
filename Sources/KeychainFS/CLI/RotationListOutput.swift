import Support
import VaultCore

/// The rotation list as `member remove` and `member rotate-list` print it: one item a line
/// (path, the member's last read or `never read`, and `changed since` for an item changed
/// after the removal), or `--json`.
enum RotationListOutput {
    /// One item of `--json`.
    struct ItemJSON: Encodable {
        let path: String
        /// ISO-8601, UTC; nil when the team log records no read by the member.
        let lastRead: String?
        let modified: String
        let changedSinceRemoval: Bool
    }

    /// The whole of `--json`.
    struct JSON: Encodable {
        let member: String
        let removed: String?
        let items: [ItemJSON]
    }

    static func write(_ list: RotationList, json: Bool) throws(VaultError) {
        for problem in list.problems { Terminal.printError("warning: team log: \(problem) (its entries are not counted)") }
        if json {
            try JSONOutput.write(JSON(member: list.member, removed: list.removed.map { JSONOutput.utcTime($0, nanoseconds: false) },
                                      items: list.items.map { item in
                ItemJSON(path: item.path.description, lastRead: item.lastRead.map { JSONOutput.utcTime($0, nanoseconds: false) },
                         modified: JSONOutput.utcTime(item.modified, nanoseconds: false), changedSinceRemoval: item.changedSinceRemoval)
            }))
            return
        }
        let name = Terminal.printable(list.member)
        let pending = list.items.filter { !$0.changedSinceRemoval }
        Terminal.printInfo("\(pending.count) item(s) \(name) could read and that have not changed since"
            + (list.removed == nil ? " (no removal of \(name) is recorded)" : " the removal")
            + ": change them; last read by \(name) as the team log records it")
        var output = ""
        for item in list.items {
            let read = item.lastRead.map { "read " + JSONOutput.utcTime($0, nanoseconds: false) } ?? "never read"
            output += [item.path.description, read, item.changedSinceRemoval ? "changed since" : "to change"]
                .map(Terminal.printable).joined(separator: "  ") + "\n"
        }
        Terminal.writeAll(1, output)
    }
}
