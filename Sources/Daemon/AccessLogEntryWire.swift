import VaultCore

/// One access log entry in a `log` reply: time, pid, executable?, unit?, node?, path?, access,
/// then the decision (0 allowed, 1 denied and its reason, 2 confirmed, 3 refused), then the
/// member who signed it (a flag, and the name and whether they are a member now).
enum AccessLogEntryWire {
    static func write(_ entry: AccessLogEntry, to writer: inout ControlWriter) throws(VaultError) {
        try writer.timestamp(entry.time)
        try writer.integer(entry.pid)
        try writer.optionalText(entry.executable)
        try writer.optionalText(entry.unit)
        try writer.flag(entry.node != nil)
        if let node = entry.node { try writer.integer(node.rawValue) }
        try writer.optionalPath(entry.path)
        try writer.integer(entry.access.rawValue)
        switch entry.decision {
        case .allowed: try writer.integer(UInt8(0))
        case .denied(let reason):
            try writer.integer(UInt8(1))
            try writer.text(reason)
        case .confirmed(let yes): try writer.integer(UInt8(yes ? 2 : 3))
        }
        try writer.flag(entry.member != nil)
        if let member = entry.member {
            try writer.text(member.name)
            try writer.flag(member.isMember)
        }
        try writer.optionalText(entry.aboutMember)
    }

    static func read(from reader: inout ControlReader) throws(VaultError) -> AccessLogEntry {
        let time = try reader.timestamp()
        let pid = try reader.integer(Int32.self)
        let executable = try reader.optionalText()
        let unit = try reader.optionalText()
        let node = try reader.flag() ? NodeID(try reader.integer(Int64.self)) : nil
        let path = try reader.optionalPath()
        guard let access = LoggedAccess(rawValue: try reader.integer(UInt8.self)) else { throw ControlReader.malformed("an unknown access") }
        let decision: LoggedDecision = switch try reader.integer(UInt8.self) {
        case 0: .allowed
        case 1: .denied(reason: try reader.text())
        case 2: .confirmed(true)
        case 3: .confirmed(false)
        default: throw ControlReader.malformed("an unknown decision")
        }
        let member = try reader.flag() ? LoggedMember(name: try reader.text(), isMember: try reader.flag()) : nil
        return AccessLogEntry(time: time, pid: pid, executable: executable, unit: unit, node: node, path: path,
                              access: access, decision: decision, member: member, aboutMember: try reader.optionalText())
    }
}
