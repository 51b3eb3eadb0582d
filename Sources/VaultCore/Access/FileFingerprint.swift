import Glibc

/// What a file's inode says of its contents without reading them: its size, when its bytes
/// last changed and when its inode last did. A rewrite in place (open with O_TRUNC and write,
/// the same inode kept) changes the times whatever the bytes; so does a chmod or chown. Setting
/// mtime back takes utimensat, which sets ctime to now: no process can set both back.
public struct FileFingerprint: Hashable, Sendable {
    public let size: UInt64
    /// Nanoseconds since the epoch.
    public let modified: Int64
    public let changed: Int64

    public init(size: UInt64, modified: Int64, changed: Int64) {
        self.size = size
        self.modified = modified
        self.changed = changed
    }

    init(_ info: stat) {
        self.init(size: UInt64(info.st_size),
                  modified: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
                  changed: Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec))
    }
}
