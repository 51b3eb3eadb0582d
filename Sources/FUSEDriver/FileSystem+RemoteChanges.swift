import VaultCore

/// What another process or machine committed to the vault, as the mount's ChangeFollower
/// hears it (PostgreSQL vaults): the kernel drops what it caches of those nodes at once
/// instead of after `cacheSeconds`, and open items catch up.
///
/// What the kernel is told: the attributes and data of every changed inode it holds, and the
/// entry of each such node under its current name (a name now meaning another node, after a
/// rename over it). A name that went away (removed or renamed elsewhere) cannot be named: the
/// vault no longer holds it and this mount keeps no names of its own, so its entry lasts until
/// `cacheSeconds` runs out; meanwhile its inode answers ENOENT once removed. A new name needs
/// nothing: a failed lookup is never cached. Directory handles keep their listings: a listing
/// is a snapshot taken at the first read (rewinddir takes a fresh one) and readdirplus checks
/// each entry again once the vault's change stamp moved, which this change already did.
extension FileSystem {
    /// On the follower's thread: never the session loop's, and the notices go out after the
    /// mutex is released.
    package func followRemoteChange(_ change: VaultChange) {
        let root = UInt64(NodeID.root.rawValue)
        let held: [UInt64] = state.withLock { state in
            let known = Set(state.lookups.inodes)
            switch change {
            case .everything:
                return Array(known.union([root]))
            case .nodes(let nodes):
                return nodes.compactMap { UInt64(exactly: $0.rawValue) }.filter { known.contains($0) || $0 == root }
            }
        }
        var entries: [(parent: UInt64, name: ItemName)] = []
        for inode in held where inode != root {
            let id = NodeID(Int64(inode))
            if let node = try? vault.node(id), let name = try? vault.name(of: id) {
                entries.append((UInt64(node.parent.rawValue), name))
            }
        }
        catchUpOpenItems(change)
        invalidateKernelCaches(entries: entries, inodes: held)
        entries.removeAll()
    }

    /// Clean open items of changed nodes take the stored content; one whose node was removed
    /// elsewhere becomes unlinked, as a local unlink makes it: its descriptors keep reading what
    /// they had, and their writes and close succeed without bringing it back.
    private func catchUpOpenItems(_ change: VaultChange) {
        state.withLock { state in
            for item in state.openItems.items where !item.stale {
                if case .nodes(let nodes) = change, !nodes.contains(item.id) { continue }
                do throws(VaultError) {
                    try catchUp(item)
                } catch .notFound {
                    item.unlinked = true
                } catch {
                    // Locked, or unreadable now: the next open checks again.
                }
            }
        }
    }
}
