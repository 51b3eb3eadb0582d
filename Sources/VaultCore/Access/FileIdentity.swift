import Glibc

/// A file as the kernel knows it: its device and inode. Two paths with the same bytes are two
/// files; a path whose file was replaced (a new file renamed over it) names another file.
public struct FileIdentity: Hashable, Sendable, CustomStringConvertible {
    public let device: UInt64
    public let inode: UInt64

    public init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }

    init(_ info: stat) {
        self.init(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// The file `path` leads to now (symbolic links followed), or nil when there is none.
    public static func of(path: String) -> FileIdentity? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return FileIdentity(info)
    }

    public var description: String { "device \(device) inode \(inode)" }
}
