import Admission
import Glibc
import VaultCore

/// lookup, forget, mkdir, rmdir, unlink, rename: the names in a dictionary. With a flusher,
/// mkdir, mknod, rmdir, unlink and rename commit at once and are durable within its window (or
/// at an fsync), as an empty item's create is; without, before they return. What a close
/// stores (written content) is durable at the close either way.
extension FileSystem {
    func lookup(_ parent: UInt64, _ name: ItemName, _ caller: RequestContext) throws(VaultError) -> Glibc.stat {
        try state.withLock { (state) throws(VaultError) in
            let node = try vault.lookup(name, in: NodeID(Int64(parent)))
            state.lookups.add(UInt64(node.id.rawValue))
            return pathStat(of: node, state)
        }
    }

    /// The kernel dropped `count` references to an inode.
    func forget(_ inode: UInt64, count: UInt64) {
        state.withLock { $0.lookups.forget(inode, count: count) }
    }

    func makeDirectory(_ parent: UInt64, _ name: ItemName, mode: mode_t, _ caller: RequestContext) throws(VaultError) -> Glibc.stat {
        // New dictionaries are private: group and other bits are dropped; the owner's bits and
        // setuid, setgid and sticky stay, as chmod keeps them.
        try state.withLock { (state) throws(VaultError) in
            guard !state.lock.locked else { throw .locked }
            let node = try vault.makeDictionary(named: name, in: NodeID(Int64(parent)), mode: UInt32(mode) & 0o7700,
                                                durable: flusher == nil)
            flusher?.changed()
            state.lookups.add(UInt64(node.id.rawValue))
            return stat(of: node)
        }
    }

    /// mknod(S_IFREG): an empty item, stored durably at once (no close follows).
    func makeItem(_ parent: UInt64, _ name: ItemName, mode: mode_t, _ caller: RequestContext) throws(VaultError) -> Glibc.stat {
        try state.withLock { (state) throws(VaultError) in
            guard !state.lock.locked else { throw .locked }
            let node = try vault.createItem(named: name, in: NodeID(Int64(parent)), content: try SecureBuffer(capacity: 0),
                                            mode: UInt32(mode) & 0o7700, durable: flusher == nil)
            flusher?.changed()
            state.lookups.add(UInt64(node.id.rawValue))
            return stat(of: node)
        }
    }

    func removeDirectory(_ parent: UInt64, _ name: ItemName, _ caller: RequestContext) throws(VaultError) {
        try state.withLock { (state) throws(VaultError) in
            guard !state.lock.locked else { throw .locked }
            let removed = try vault.remove(named: name, in: NodeID(Int64(parent)), kind: .dictionary, durable: flusher == nil)
            gate.namespaceChanged()
            flusher?.changed()
            state.directories.noteRemoved(removed, at: .now())
        }
    }

    func unlink(_ parent: UInt64, _ name: ItemName, _ caller: RequestContext) throws(VaultError) {
        try state.withLock { (state) throws(VaultError) in
            guard !state.lock.locked else { throw .locked }
            try keepOpenContent(named: name, in: parent, state)
            let removed = try vault.remove(named: name, in: NodeID(Int64(parent)), kind: .item, durable: flusher == nil)
            gate.namespaceChanged()
            flusher?.changed()
            state.openItems.item(removed)?.unlinked = true
        }
    }

    func rename(_ parent: UInt64, _ name: ItemName, to newParent: UInt64, _ newName: ItemName, noReplace: Bool,
                _ caller: RequestContext) throws(VaultError) {
        try state.withLock { (state) throws(VaultError) in
            guard !state.lock.locked else { throw .locked }
            if !noReplace { try keepOpenContent(named: newName, in: newParent, state) }
            let replaced = try vault.move(name, from: NodeID(Int64(parent)), to: newName, in: NodeID(Int64(newParent)),
                                          replacing: !noReplace, durable: flusher == nil)
            gate.namespaceChanged()
            flusher?.changed()
            if let replaced {
                state.openItems.item(replaced)?.unlinked = true
                state.directories.noteRemoved(replaced, at: .now())
            }
        }
    }

    /// An open item about to be unlinked or replaced takes every stored block it does not hold
    /// yet: its descriptors go on reading it, as on tmpfs, after the vault deleted its blocks.
    private func keepOpenContent(named name: ItemName, in parent: UInt64, _ state: borrowing State) throws(VaultError) {
        guard !state.openItems.isEmpty else { return }
        guard let node = try? vault.lookup(name, in: NodeID(Int64(parent))), node.kind == .item,
              let item = state.openItems.item(node.id), !item.forgotten else { return }
        try item.content.loadAll(from: vault)
    }
}
