import CFuse
import Glibc
import VaultCore

/// Tells the kernel to drop what it caches of the mount (names, attributes), as locking needs.
enum FUSENotifications {
    static func invalidate(session: OpaquePointer, entries: [(parent: UInt64, name: ItemName)], inodes: [UInt64]) {
        for entry in entries {
            // libfuse sends the name with its terminating NUL.
            entry.name.withCString { name, count in
                // ENOENT only means the kernel had already let it go.
                _ = fuse_lowlevel_notify_inval_entry(session, fuse_ino_t(entry.parent), name, count)
            }
        }
        for inode in inodes {
            _ = fuse_lowlevel_notify_inval_inode(session, fuse_ino_t(inode), 0, 0)
        }
    }
}
