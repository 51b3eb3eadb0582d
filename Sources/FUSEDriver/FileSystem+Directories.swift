import Admission
import Glibc
import VaultCore

/// opendir, readdir, readdirplus, releasedir.
extension FileSystem {
    /// opendir: checks the dictionary; its entries are listed by the first readdir, which is
    /// also what a rewinddir before any read must see.
    func openDirectory(_ inode: UInt64, _ caller: RequestContext) throws(VaultError) -> UInt64 {
        let node = try vault.node(NodeID(Int64(inode)))
        guard node.kind == .dictionary else { throw .notADictionary("node \(inode)") }
        return try state.withLock { (state) throws(VaultError) in
            guard !state.lock.locked else { throw .locked }
            let handle = state.newHandle()
            state.directories.open(handle, on: node)
            return handle
        }
    }

    private func listDirectory(_ inode: UInt64) throws(VaultError) -> DirectoryListing {
        let id = NodeID(Int64(inode))
        let stamp = try vault.changeStamp()
        let node = try vault.node(id)
        var entries = [
            DirectoryListing.Entry(name: .dot, inode: inode, isDictionary: true),
            DirectoryListing.Entry(name: .dotDot, inode: id == .root ? inode : UInt64(node.parent.rawValue), isDictionary: true),
        ]
        for entry in try vault.entries(of: id) {
            entries.append(DirectoryListing.Entry(name: .named(entry.name), inode: UInt64(entry.node.id.rawValue),
                                                  isDictionary: entry.node.kind == .dictionary, found: .node(entry.node), checkedAt: stamp))
        }
        return DirectoryListing(entries: entries, stamp: stamp)
    }

    /// Makes the handle's listing ready for a read at `offset`: reading from the start (the
    /// first read, or after rewinddir) takes a fresh listing. A listing that a lock wiped is
    /// taken again when nothing changed meanwhile (the same stamp lists the same entries in the
    /// same order), so a long `find` survives an idle lock and unlock; if something changed,
    /// the read fails rather than end the listing early.
    private func prepareListing(_ handle: UInt64, inode: UInt64, from offset: Int) throws(VaultError) {
        let wiped = try state.withLock { (state) throws(VaultError) -> DirectoryListing? in
            guard !state.lock.locked else { throw .locked }
            guard let listing = state.directories.listing(handle) else { throw .invalidArgument("bad directory handle") }
            return listing.wipedCount == nil ? nil : listing
        }
        guard offset == 0 || wiped != nil else { return }
        let fresh = try listDirectory(inode)
        if offset != 0, let wiped, fresh.stamp != wiped.stamp || fresh.entries.count != wiped.wipedCount {
            throw .integrityFailure("the directory changed while the vault was locked; open it again")
        }
        try state.withLock { (state) throws(VaultError) in
            guard !state.lock.locked else { throw .locked }
            state.directories.set(fresh, for: handle)
        }
    }

    /// readdir: entries from `offset` on, as listed; `pack(entry, next)` says whether it fit.
    func directoryEntries(_ handle: UInt64, inode: UInt64, from offset: Int, _ caller: RequestContext,
                          pack: (DirectoryListing.Entry, _ next: Int) -> Bool) throws(VaultError) {
        try prepareListing(handle, inode: inode, from: offset)
        try state.withLock { (state) throws(VaultError) in
            guard !state.lock.locked else { throw .locked }
            guard let listing = state.directories.listing(handle), offset >= 0, offset < listing.entries.count else { return }
            for position in offset..<listing.entries.count {
                guard pack(listing.entries[position], position + 1) else { return }
            }
        }
    }

    /// readdirplus: entries from `offset` on, each with what a lookup would answer now. A
    /// later part of a listing may be read after something was committed (a rename meanwhile,
    /// a CLI `set`): entries checked before that are looked up again, a batch at a time in one
    /// snapshot, and the listing keeps what was found, so each entry is checked at most once
    /// per change. A name gone is left out; one whose lookup fails goes without attributes (its
    /// own lookup will say why). `pack(name, attributes, asEntry, next)` says whether an entry
    /// fit (`next` is the offset a later read resumes from); each packed as an entry is a
    /// lookup the kernel will later forget, so it is counted like one.
    func directoryEntriesWithAttributes(
        _ handle: UInt64, inode: UInt64, from offset: Int, _ caller: RequestContext,
        pack: (_ name: DirectoryListing.Entry.Name, _ attributes: Glibc.stat, _ asEntry: Bool, _ next: Int) -> Bool
    ) throws(VaultError) {
        try prepareListing(handle, inode: inode, from: offset)
        let directory = NodeID(Int64(inode))
        try state.withLock { (state) throws(VaultError) in
            guard !state.lock.locked else { throw .locked }
            guard var listing = state.directories.take(handle) else { return }
            defer { state.directories.set(listing, for: handle) }
            let now = try vault.changeStamp()
            var index = max(offset, 0)
            while index < listing.entries.count {
                let batch = index..<min(index + 64, listing.entries.count)
                let stale = batch.filter { listing.entries[$0].found != nil && listing.entries[$0].checkedAt != now }
                if !stale.isEmpty {
                    var names: [ItemName] = []
                    for position in stale {
                        if case .named(let name) = listing.entries[position].name { names.append(name) }
                    }
                    for (position, result) in zip(stale, try vault.lookup(names, in: directory)) {
                        switch result {
                        case .success(let node): listing.entries[position].found = .node(node)
                        case .failure(.notFound): listing.entries[position].found = .gone
                        case .failure: listing.entries[position].found = .unreadable
                        }
                        listing.entries[position].checkedAt = now
                    }
                }
                for position in batch {
                    let entry = listing.entries[position]
                    switch entry.found {
                    case .gone?:
                        continue
                    case .node(let node)?:
                        guard pack(entry.name, pathStat(of: node, state), true, position + 1) else { return }
                        state.lookups.add(UInt64(node.id.rawValue))
                    case nil, .unreadable?:
                        guard pack(entry.name, entry.direntStat, false, position + 1) else { return }
                    }
                }
                index = batch.upperBound
            }
        }
    }

    /// fsync of a directory: its namespace changes, and every other before them, are durable
    /// on return (the whole vault is one journal, so syncing one is syncing all).
    func syncDirectory(_ caller: RequestContext) throws(VaultError) {
        try flusher?.syncNow()
    }

    func releaseDirectory(_ handle: UInt64) {
        state.withLock { $0.directories.close(handle) }
    }
}
