/// What a request does to a path, as access rules tell them apart.
public enum Access: Hashable, Sendable, CustomStringConvertible {
    /// Opening an item for reading.
    case read
    /// Listing a dictionary.
    case list
    /// Everything else a rule guards: opening for writing, create, mkdir, unlink, rmdir,
    /// rename (source and destination), truncate and attribute changes.
    case write

    /// As a confirmation command is told (`KEYCHAINFS_ACCESS`): `read` or `write`.
    public var description: String {
        self == .write ? "write" : "read"
    }
}
