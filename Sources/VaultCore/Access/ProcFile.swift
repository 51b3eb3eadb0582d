import Glibc

/// Whole /proc files read with read(2): a /proc file is generated as it is read, and readers
/// that stop at the first short read (as Foundation's may) see part of it.
enum ProcFile {
    /// The bytes of `name` relative to the directory `directory`, nil when it cannot be read
    /// (the process is gone, or is not ours to see).
    static func contents(_ name: String, in directory: Int32) -> [UInt8]? {
        let fd = openat(directory, name, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(fd, &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            if count < 0 { return nil }
            if count == 0 { return bytes }
            bytes += chunk[..<count]
        }
    }
}
