import Dispatch
import VaultCore

/// What the kernel caches of a mount served by the same process: a change made over D-Bus
/// drops it at once, so the mount shows the change at once, as it shows its own (the CLI's
/// changes wait for the cache to expire, half a second).
package protocol MountCache: Sendable {
    /// A name that now means something else (made, removed or replaced).
    func dropEntry(_ name: ItemName, in parent: NodeID)
    /// A node whose content or attributes changed.
    func dropNode(_ node: NodeID)
}
