import ArgumentParser

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a mount's state (or every mount of yours): vault, locked or not, items, idle lock, daemon."
    )

    @Flag(help: "Print JSON (an object for one mountpoint, an array for all).") var json = false
    @Argument(help: "The mountpoint (default: every mount of this user).") var mountpoint: String?

    func run() throws {
        try reportingFailures { () throws(CommandFailure) in
            if let mountpoint {
                let reply = try ControlSocket.request(Mountpoint.resolved(mountpoint), "status")
                Terminal.writeAll(1, (json ? reply : Status.describe(reply)) + "\n")
                return
            }
            var replies: [String] = []
            for record in RuntimeState.allRecords() {
                if let reply = try? ControlSocket.request(record.mountpoint, "status") { replies.append(reply) }
            }
            if json {
                Terminal.writeAll(1, "[" + replies.joined(separator: ",") + "]\n")
            } else {
                Terminal.writeAll(1, replies.isEmpty ? "no keychainfs mounts\n" : replies.map(Status.describe).joined(separator: "\n") + "\n")
            }
        }
    }

    /// The human form of a status reply, read back from its JSON fields.
    static func describe(_ json: String) -> String {
        func field(_ name: String) -> String {
            let key = Array("\"\(name)\":".utf8)
            let bytes = Array(json.utf8)
            guard let start = (0...max(0, bytes.count - key.count)).first(where: { bytes[$0..<min($0 + key.count, bytes.count)].elementsEqual(key) }) else {
                return "?"
            }
            let rest = Substring(String(decoding: bytes[(start + key.count)...], as: UTF8.self))
            if rest.hasPrefix("\"") {
                var value = ""
                var escaped = false
                for character in rest.dropFirst() {
                    if escaped { value.append(character == "n" ? "\n" : character); escaped = false; continue }
                    if character == "\\" { escaped = true; continue }
                    if character == "\"" { break }
                    value.append(character)
                }
                return value
            }
            return String(rest.prefix { $0 != "," && $0 != "}" })
        }
        let idle = field("idle_lock_seconds")
        let locksIn = field("locks_in_seconds")
        let idleText = idle == "null" ? "off" : "after \(idle) s without access" + (locksIn == "null" ? "" : " (locks in \(locksIn) s)")
        return """
            \(field("mountpoint"))
              vault:     \(field("vault"))
              state:     \(field("locked") == "true" ? "locked" : "unlocked")
              items:     \(field("items"))
              idle lock: \(idleText)
              daemon:    pid \(field("pid"))
            """
    }
}
