import VaultCore

/// Which access log entries `log` prints: its filters, one value for the first reading and every
/// one `--follow` makes after it.
struct EntrySelection {
    var deniedOnly: Bool
    var signedBy: String?
    /// Entries at or below this path.
    var below: VaultPath?
    /// Entries about this node itself.
    var exactly: VaultPath?

    func keeps(_ entry: AccessLogEntry) -> Bool {
        if deniedOnly && !entry.decision.isDenial { return false }
        if let signedBy, entry.member?.name != signedBy { return false }
        if let exactly, entry.path != exactly { return false }
        guard let below else { return true }
        guard let path = entry.path else { return false }
        return path.components.count >= below.components.count && zip(path.components, below.components).allSatisfy { $0 == $1 }
    }

    /// `log --member NAME`, as one would write it: `--member` is every command's flag to open
    /// the vault with one's member key, so NAME arrives as the path. A one-component path that
    /// no entry is at or below, and that names a member who signed entries, is taken as that
    /// member (`--by`); any other stays a path, so a dictionary named like a member is still one.
    func resolvingMember(_ text: String, in reading: AccessLogReading) -> EntrySelection {
        guard signedBy == nil, reading.hasMembers, let path = below, path.components.count == 1,
              !reading.entries.contains(where: keeps),
              reading.entries.contains(where: { $0.member?.name == text }) else { return self }
        var member = self
        member.below = nil
        member.signedBy = text
        return member
    }
}
