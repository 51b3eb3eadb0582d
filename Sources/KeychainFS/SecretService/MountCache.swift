import Dispatch
import VaultCore

/// What the kernel caches of a mount served by the same process: a change made over D-Bus
/// drops it at once, so the mount shows the change at once, as it shows its own (the CLI's
/// changes wait for the cache to expire, half a second).
protocol MountCache: Sendable {
    /// A name that now means something else (made, removed or replaced).
    func dropEntry(_ name: ItemName, in parent: NodeID)
    /// A node whose content or attributes changed.
    func dropNode(_ node: NodeID)
}

/// The kernel may make a notice wait for a request the mount is still answering (one that
/// waits for a confirmation, say): notices go out in order from a queue of their own, never
/// holding up the bus's loop.
private let notices = DispatchQueue(label: "keychainfs.mount-cache-notices")

extension FileSystem: MountCache {
    func dropEntry(_ name: ItemName, in parent: NodeID) {
        notices.async { [self] in invalidateKernelCaches(entries: [(UInt64(parent.rawValue), name)], inodes: []) }
    }

    func dropNode(_ node: NodeID) {
        notices.async { [self] in invalidateKernelCaches(entries: [], inodes: [UInt64(node.rawValue)]) }
    }
}
