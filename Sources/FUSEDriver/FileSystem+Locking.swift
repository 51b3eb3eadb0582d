import Glibc
import Support
import VaultCore

/// lock, unlock, and the wipe at unmount.
extension FileSystem {
    package var isLocked: Bool { state.withLock { $0.lock.locked } }

    /// Locks the mount: unfinished writes are refused (never stored half-written), then every
    /// plaintext buffer, name and key is wiped, and the kernel is told to drop the names and
    /// attributes it caches. Open descriptors stay open and answer EACCES until unlock. While
    /// the vault holds after-first-unlock items, the vault keeps their keys (and only theirs),
    /// and their open items keep their plaintext, pending writes and descriptors.
    package func lock() {
        gate.willLock()
        var entries: [(parent: UInt64, name: ItemName)] = []
        var inodes: [UInt64] = []
        let locked = state.withLock { state -> Bool in
            // Names of what the kernel caches, decrypted while the keys still exist.
            let cached = Array(state.lookups.inodes)
            guard state.lock.beginLock() else {
                vault.lock()  // already locked: make sure no key is left whatever happened before
                return false
            }
            for inode in cached where inode != UInt64(NodeID.root.rawValue) {
                inodes.append(inode)
                if let node = try? vault.node(NodeID(Int64(inode))), let name = try? vault.name(of: node.id) {
                    entries.append((UInt64(node.parent.rawValue), name))
                }
            }
            // The class as stored decides, not an open item's copy of its attributes:
            // `keychainfs class` may have changed it since the item was opened.
            let storedAfterFirstUnlock = Set(state.openItems.items.compactMap { item -> NodeID? in
                (try? vault.node(item.node.id))?.attributes.accessibility == .afterFirstUnlock ? item.node.id : nil
            })
            vault.lock()
            let keeping = vault.keepsAfterFirstUnlockKeys
            for item in state.openItems.items where !(keeping && storedAfterFirstUnlock.contains(item.node.id)) {
                if item.dirty && !item.unlinked {
                    // Unfinished writes are refused, not stored half-written: the descriptors
                    // that made them answer EACCES from now on and their close reports it; the
                    // item keeps its stored content.
                    for file in state.openItems.descriptors(of: item) where file.wrote {
                        file.refusal = .locked
                        file.wrote = false
                    }
                    item.dirty = false
                    item.modified = item.node.attributes.modified
                    item.lastChange = item.node.attributes.changed
                }
                item.wipeContent()
                item.forgotten = true
            }
            // Open directory handles stay open: their names go, what comes back after unlock
            // is decided when they are read again.
            state.directories.wipeNames()
            return true
        }
        if locked { gate.didLock() }
        invalidateKernelCaches(entries: entries, inodes: inodes + [UInt64(NodeID.root.rawValue)])
        entries.removeAll()
        // What the requests served before left on the session thread's stack, and what the
        // names above left on this one.
        sessionStack.waitForWipe()
        StackWipe.here()
    }

    /// Unlocks with a passphrase; a wrong one leaves everything locked.
    package func unlock(passphrase: borrowing SecureBuffer) throws(VaultError) {
        try unlock(passphrase, as: .passphrase)
    }

    /// Unlocks with the passphrase or the TPM PIN, as `kind` says; a wrong one leaves everything locked.
    package func unlock(_ secret: borrowing SecureBuffer, as kind: UnlockSecret) throws(VaultError) {
        state.withLock { $0.lock.beginUnlock() }
        var derived = false
        defer {
            // One decision under the mutex: a lock asked for during the key derivation wins,
            // and then the keys just derived go at once.
            let unlocked = state.withLock { state in
                let unlocked = state.lock.endUnlock(succeeded: derived)
                if derived && !unlocked { vault.lock() }
                return unlocked
            }
            // Idle time starts again now, or the idle lock would undo this at once.
            if unlocked { noteActivity() }
        }
        try vault.unlock(secret, as: kind)
        derived = true
        gate.didUnlock()
        // Before requests are served again: rules may have changed while the vault was locked.
        gate.refresh()
    }

    /// Stores pending writes, then wipes every open item's plaintext and the keys (unmount,
    /// or the end of the session loop, whatever ended it). Returns the stores that failed:
    /// nobody is left to hear of them but the log.
    @discardableResult
    package func forgetEverything() -> [VaultError] {
        var failures: [VaultError] = []
        state.withLock { state in
            if !state.lock.locked {
                // An unmount is a last close for every descriptor.
                for item in state.openItems.items where item.dirty && !item.unlinked {
                    let writers = state.openItems.descriptors(of: item).filter { $0.refusal == nil }
                    guard !writers.isEmpty else { continue }
                    do throws(VaultError) { try store(item, state) } catch { failures.append(error) }
                }
            }
            state.openItems.removeAll()
            state.directories.removeAll()
            state.lock.lockForGood()
        }
        vault.lock(keepingAfterFirstUnlock: false)
        return failures
    }
}
