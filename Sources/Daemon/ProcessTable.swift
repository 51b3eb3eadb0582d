import Glibc
import SystemCalls
import SystemPackage

/// Process queries (/proc): which daemon serves a mountpoint, and whether it still runs.
package enum ProcessTable {
    /// Whether `pid` is a keychainfs daemon for `mountpoint` (a record may outlive its daemon,
    /// and its pid be reused).
    /// `byRecord`: the daemon's own record names the mountpoint, so its command line need
    /// only be a keychainfs mount (a foreground one may have been given a relative path).
    package static func isDaemon(_ pid: pid_t, serving mountpoint: String, byRecord: Bool = false) -> Bool {
        let arguments = commandLine(pid)
        return arguments.first.map { $0.hasSuffix("keychainfs") } == true && arguments.contains("mount")
            && (byRecord || arguments.last == mountpoint)
    }

    /// The daemon serving `mountpoint`, found by its command line (when no record says).
    package static func daemon(serving mountpoint: String) -> pid_t? {
        guard let dir = opendir("/proc") else { return nil }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
            if let pid = pid_t(name), pid != getpid(), isDaemon(pid, serving: mountpoint) { return pid }
        }
        return nil
    }

    private static func commandLine(_ pid: pid_t) -> [String] {
        guard let bytes = try? FileDescriptor.contents(of: "/proc/\(pid)/cmdline") else { return [] }
        return bytes.split(separator: 0, omittingEmptySubsequences: false).dropLast().map { String(decoding: $0, as: UTF8.self) }
    }

    /// Whether `pid` still runs (a zombie counts as gone: nothing of it is left to wipe).
    package static func isRunning(_ pid: pid_t) -> Bool {
        guard kill(pid, 0) == 0 || Errno.last == .notPermitted else { return false }
        guard let file = fopen("/proc/\(pid)/stat", "r") else { return false }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 512)
        guard fgets(&buffer, Int32(buffer.count), file) != nil else { return false }
        let text = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        guard let close = text.lastIndex(of: ")") else { return true }
        let state = text[text.index(after: close)...].trimmingPrefix(" ").first
        return state != "Z" && state != "X"
    }
}
