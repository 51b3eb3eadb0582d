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

    init?(_ bytes: [UInt8]) {
        var tgid: pid_t?, tracer: pid_t?, group: gid_t?
        for line in bytes.split(separator: 0x0A) {
            let fields = line.split(whereSeparator: { $0 == 0x20 || $0 == 0x09 })
            guard let key = fields.first else { continue }
            switch String(decoding: key, as: UTF8.self) {
            case "Tgid:": tgid = fields.count > 1 ? pid_t(String(decoding: fields[1], as: UTF8.self)) : nil
            case "TracerPid:": tracer = fields.count > 1 ? pid_t(String(decoding: fields[1], as: UTF8.self)) : nil
            // Real, effective, saved, filesystem.
            case "Gid:": group = fields.count > 2 ? gid_t(String(decoding: fields[2], as: UTF8.self)) : nil
            default: continue
            }
        }
        guard let tgid, let tracer, let group else { return nil }
        processID = tgid
        tracerPID = tracer
        effectiveGroup = group
    }
}
