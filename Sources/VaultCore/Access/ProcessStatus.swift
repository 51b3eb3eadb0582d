import Glibc

/// What access rules need of `/proc/PID/status`, which anyone may read, even of a process
/// that is not dumpable (where `exe`, `environ` and `maps` are refused to its own user).
public struct ProcessStatus: Hashable, Sendable {
    /// The thread group (process) a thread belongs to.
    public let processID: pid_t
    /// The process tracing this one (ptrace), 0 when none.
    public let tracerPID: pid_t
    /// The effective group: a setgid program's group while it runs.
    public let effectiveGroup: gid_t

    /// Reads the lines it needs, all among the first dozen, and stops there: this is parsed
    /// for every judged request.
    init?(_ bytes: [UInt8]) {
        var tgid: Int64?, tracer: Int64?, group: Int64?
        var index = 0
        while index < bytes.count, tgid == nil || tracer == nil || group == nil {
            let end = bytes[index...].firstIndex(of: 0x0A) ?? bytes.count
            let line = bytes[index..<end]
            if line.starts(with: ProcessStatus.tgid) {
                tgid = ProcessStatus.number(line.dropFirst(ProcessStatus.tgid.count))
            } else if line.starts(with: ProcessStatus.tracer) {
                tracer = ProcessStatus.number(line.dropFirst(ProcessStatus.tracer.count))
            } else if line.starts(with: ProcessStatus.gid) {
                // Real, effective, saved, filesystem: the second.
                let rest = line.dropFirst(ProcessStatus.gid.count).drop { $0 == 0x09 || $0 == 0x20 }
                group = ProcessStatus.number(rest.drop { $0 != 0x09 && $0 != 0x20 })
            }
            index = end + 1
        }
        guard let tgid, let tracer, let group else { return nil }
        processID = pid_t(truncatingIfNeeded: tgid)
        tracerPID = pid_t(truncatingIfNeeded: tracer)
        effectiveGroup = gid_t(truncatingIfNeeded: group)
    }

    private static let tgid = Array("Tgid:".utf8), tracer = Array("TracerPid:".utf8), gid = Array("Gid:".utf8)

    /// The decimal number after any blanks.
    private static func number(_ text: ArraySlice<UInt8>) -> Int64? {
        var value: Int64 = 0, digits = 0
        for byte in text.drop(while: { $0 == 0x09 || $0 == 0x20 }) {
            guard byte >= 0x30 && byte <= 0x39, digits < 18 else { break }
            value = value * 10 + Int64(byte - 0x30)
            digits += 1
        }
        return digits > 0 ? value : nil
    }
}
