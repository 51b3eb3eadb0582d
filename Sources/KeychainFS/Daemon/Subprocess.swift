import Glibc

/// Runs helper programs (fusermount3) and reports their status and standard error.
enum Subprocess {
    struct Outcome {
        let status: Int32
        let errorOutput: String
    }

    static func run(_ executable: String, _ arguments: [String]) -> Outcome {
        var errPipe: [Int32] = [0, 0]
        guard pipe(&errPipe) == 0 else { return Outcome(status: -1, errorOutput: "cannot create a pipe") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        posix_spawn_file_actions_addclose(&actions, errPipe[0])
        posix_spawn_file_actions_addclose(&actions, errPipe[1])
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawnp(&pid, executable, &actions, nil, argv, environ)
        close(errPipe[1])
        defer { close(errPipe[0]) }
        guard rc == 0 else { return Outcome(status: -1, errorOutput: "cannot run \(executable): \(String(cString: strerror(rc)))") }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(errPipe[0], &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            output += chunk[..<n]
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exitStatus = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        return Outcome(status: exitStatus, errorOutput: String(decoding: output, as: UTF8.self))
    }

    /// Whether `pid` is a keychainfs daemon for `mountpoint` (a record may outlive its daemon,
    /// and its pid be reused).
    /// `byRecord`: the daemon's own record names the mountpoint, so its command line need
    /// only be a keychainfs mount (a foreground one may have been given a relative path).
    static func isDaemon(_ pid: pid_t, serving mountpoint: String, byRecord: Bool = false) -> Bool {
        let arguments = commandLine(pid)
        return arguments.first.map { $0.hasSuffix("keychainfs") } == true && arguments.contains("mount")
            && (byRecord || arguments.last == mountpoint)
    }

    /// The daemon serving `mountpoint`, found by its command line (when no record says).
    static func daemon(serving mountpoint: String) -> pid_t? {
        guard let dir = opendir("/proc") else { return nil }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
            if let pid = pid_t(name), pid != getpid(), isDaemon(pid, serving: mountpoint) { return pid }
        }
        return nil
    }

    private static func commandLine(_ pid: pid_t) -> [String] {
        let fd = open("/proc/\(pid)/cmdline", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n <= 0 { break }
            bytes += chunk[..<n]
        }
        return bytes.split(separator: 0, omittingEmptySubsequences: false).dropLast().map { String(decoding: $0, as: UTF8.self) }
    }

    /// Whether `pid` still runs (a zombie counts as gone: nothing of it is left to wipe).
    static func isRunning(_ pid: pid_t) -> Bool {
        guard kill(pid, 0) == 0 || errno == EPERM else { return false }
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
