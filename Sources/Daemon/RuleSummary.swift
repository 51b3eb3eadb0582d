import VaultCore

/// What `rules` shows of one access rule: its text and flags, and whether its file is still
/// the one it was made for (judged where the rule was read).
package struct RuleSummary: Sendable {
    package let text: String
    package let executable: String?
    package let unit: String?
    package let readOnly: Bool
    package let confirm: Bool
    /// For an executable: its file was replaced, removed or rewritten since the rule was made.
    package let fileChanged: Bool
    /// For an executable: the rule recorded the file's size and times.
    package let fileRecorded: Bool

    package init(_ rule: AccessRule) {
        text = rule.description
        switch rule.principal {
        case .executable(let path, _, _, let fingerprint):
            executable = path
            unit = nil
            fileRecorded = fingerprint != nil
        case .unit(let name):
            executable = nil
            unit = name
            fileRecorded = false
        }
        readOnly = rule.readOnly
        confirm = rule.confirm
        fileChanged = rule.principal.fileChanged
    }

    func write(to writer: inout ControlWriter) throws(VaultError) {
        try writer.text(text)
        try writer.optionalText(executable)
        try writer.optionalText(unit)
        for flag in [readOnly, confirm, fileChanged, fileRecorded] { try writer.flag(flag) }
    }

    init(from reader: inout ControlReader) throws(VaultError) {
        text = try reader.text()
        executable = try reader.optionalText()
        unit = try reader.optionalText()
        readOnly = try reader.flag()
        confirm = try reader.flag()
        fileChanged = try reader.flag()
        fileRecorded = try reader.flag()
    }
}
