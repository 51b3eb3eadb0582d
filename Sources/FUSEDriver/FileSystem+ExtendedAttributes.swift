import Admission
import Glibc
import VaultCore

/// getxattr, listxattr, setxattr, removexattr. The mount shows a node's attributes as the
/// `user.` namespace (the vault stores them without the prefix) and its properties as
/// `keychainfs.label` and `keychainfs.content_type`, which are not listed; every other
/// namespace is answered without touching the vault: the kernel asks for
/// `security.capability` before every write, which must cost nothing.
extension FileSystem {
    /// The value, in locked memory, for `reply` to send.
    func extendedAttribute(_ inode: UInt64, _ name: ExtendedAttributeName, _ caller: RequestContext,
                           reply: (borrowing SecureBuffer) -> Void) throws(VaultError) {
        try state.withLock { (state) throws(VaultError) in
            guard !state.lock.locked else { throw .locked }
            let id = NodeID(Int64(inode))
            switch name {
            case .attribute(let name):
                reply(try vault.attribute(name, of: id))
            case .property(let property):
                guard let value = try vault.property(property, of: id) else { throw .noSuchAttribute("node \(id)") }
                reply(value)
            }
        }
    }

    /// `user.NAME\0` for every attribute, packed in locked memory (names are secrets too).
    func extendedAttributeList(_ inode: UInt64, _ caller: RequestContext) throws(VaultError) -> SecureBuffer {
        try state.withLock { (state) throws(VaultError) in
            guard !state.lock.locked else { throw .locked }
            let names = try vault.attributeNames(of: NodeID(Int64(inode)))
            var total = 0
            for name in names { total += ExtendedAttributeName.userNamespace.count + name.count + 1 }
            var list = try SecureBuffer(capacity: total)
            guard total > 0 else { return list }
            list.withUnsafeMutableStorage { storage in
                var used = 0
                for name in names {
                    for byte in ExtendedAttributeName.userNamespace {
                        storage[used] = byte
                        used += 1
                    }
                    name.withUnsafeBytes { storage.baseAddress!.advanced(by: used).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                    used += name.count
                    storage[used] = 0  // each name ends in a NUL, as listxattr(2) gives them
                    used += 1
                }
                return used
            }
            return list
        }
    }

    func setExtendedAttribute(_ inode: UInt64, _ name: ExtendedAttributeName, value: UnsafeRawBufferPointer, mode: AttributeSetMode,
                              _ caller: RequestContext) throws(VaultError) {
        try state.withLock { (state) throws(VaultError) in
            guard !state.lock.locked else { throw .locked }
            // The kernel's copy sits in the request buffer, which the session loop wipes.
            let secure = try SecureBuffer(copying: value)
            switch name {
            // A metadata change like chmod: durable within the flusher's window, or at fsync.
            case .attribute(let name):
                try vault.setAttribute(name, to: secure, of: NodeID(Int64(inode)), mode: mode, durable: flusher == nil)
            case .property(let property):
                try vault.setProperty(property, to: secure, of: NodeID(Int64(inode)), mode: mode, durable: flusher == nil)
            }
            flusher?.changed()
            try refreshChangeTime(NodeID(Int64(inode)), state)
        }
    }

    /// An attribute change moves the node's ctime; an open item shows it too.
    private func refreshChangeTime(_ id: NodeID, _ state: borrowing State) throws(VaultError) {
        guard let item = state.openItems.item(id) else { return }
        item.node.attributes.changed = try vault.node(id).attributes.changed
        // What stat shows of an open item, and what its next store keeps.
        item.lastChange = item.node.attributes.changed
    }

    func removeExtendedAttribute(_ inode: UInt64, _ name: ExtendedAttributeName, _ caller: RequestContext) throws(VaultError) {
        try state.withLock { (state) throws(VaultError) in
            guard !state.lock.locked else { throw .locked }
            switch name {
            case .attribute(let name): try vault.removeAttribute(name, of: NodeID(Int64(inode)), durable: flusher == nil)
            case .property(let property): try vault.removeProperty(property, of: NodeID(Int64(inode)), durable: flusher == nil)
            }
            flusher?.changed()
            try refreshChangeTime(NodeID(Int64(inode)), state)
        }
    }
}
