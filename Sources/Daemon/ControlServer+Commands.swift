import Admission
import FUSEDriver
import Glibc
import Support
import VaultCore

/// The command line's requests (`get`, `ls`, `set`, ... without a passphrase), served from the
/// unlocked vault this daemon holds. Every request is judged as the mount judges the same
/// access by the process that wrote it (SO_PASSCRED, not the one that connected): reading an
/// item or its attributes is a read of it, listing a dictionary a list, changing an entry a
/// write of it and of its dictionary, as open, getxattr, readdir, create, unlink and rename
/// are; `find` leaves out what the caller may not read, as the Secret Service's search does;
/// `log` and `export`, which show the whole vault, need every rule of the vault to admit the
/// caller. A `--confirm` rule asks on this connection's thread; the access log records it all.
///
/// Request: `cmd VERB N`, then an N-byte payload (ControlRequest says its fields). Reply:
/// `ok N` and N bytes, or `error STATUS MESSAGE`; for `export`, frames (ControlRequest).
extension ControlServer {
    /// Room beside an item's content for its path and attributes.
    static let payloadOverheadBytes = 1 << 20

    func serveCommand(_ connection: Int32, _ verb: ControlRequest, payloadBytes count: Int, sender: MessageSender) {
        let caller = sender.context
        do throws(VaultError) {
            // Bounded by the largest item this vault takes, and grown as bytes come: a client
            // announcing much and sending little holds little locked memory.
            guard count <= served.vault.itemSizeLimit + ControlServer.payloadOverheadBytes else {
                throw .itemTooLarge(size: count, limit: served.vault.itemSizeLimit)
            }
            var payload = try SecureBuffer(capacity: min(max(count, 1), 65536))
            guard try readPayload(connection, into: &payload, exactly: count, from: sender) else {
                refuse(connection, .shortPayload, .usage, "short request, or written by another process than the request line")
                return
            }
            guard !served.locking.isLocked else { throw .locked }
            if verb == .export {
                try payload.withUnsafeBytes { (raw) throws(VaultError) in
                    var reader = ControlReader(raw)
                    try export(connection, &reader, caller)
                }
                return
            }
            let reply = try payload.withUnsafeBytes { (raw) throws(VaultError) -> SecureBuffer in
                var reader = ControlReader(raw)
                var writer = try ControlWriter()
                try answer(verb, &reader, into: &writer, caller)
                try reader.finish()
                return writer.finish()
            }
            // An access like any other: it holds off the idle lock.
            served.locking.noteActivity()
            ControlSocket.send(connection, "ok \(reply.count)")
            _ = reply.withUnsafeBytes { Terminal.writeAll(connection, $0) }
        } catch .locked {
            ControlSocket.sendError(connection, .vaultBusy, ControlServer.lockedMessage)
        } catch {
            ControlSocket.sendError(connection, ExitStatus.code(for: error), error.description)
        }
    }

    /// What a command hears from a locked daemon: one line, and how to go on.
    static let lockedMessage = "the vault is locked: `keychainfs unlock` unlocks it (or give --passphrase-file or --extpass to open the vault file here)"

    private func answer(_ verb: ControlRequest, _ reader: inout ControlReader, into writer: inout ControlWriter,
                        _ caller: RequestContext) throws(VaultError) {
        let vault = served.vault
        switch verb {
        case .limits:
            try writer.integer(Int64(vault.itemSizeLimit))
        case .item:
            // The reply is the content itself.
            // The node the rules admitted is the one read, whatever the path names meanwhile.
            let path = try reader.path()
            let node = try vault.node(at: path)
            guard node.kind == .item else { throw .isADictionary(path.description) }
            try admit([AccessCheck(access: .read, target: .node(node.id), isAlwaysRecorded: true)], caller)
            let content = try vault.item(node.id).takeContent()
            try content.withUnsafeBytes { (raw) throws(VaultError) in try writer.raw(raw) }
        case .list:
            let path = try reader.path()
            let details = try reader.flag()
            try admit([.list(inode(of: path))], caller)
            let entries = try vault.list(path)
            if details { try admit(entries.map { .read(UInt64($0.node.id.rawValue)) }, caller) }
            try writer.integer(UInt32(entries.count))
            for entry in entries {
                try writer.name(entry.name)
                try NodeSummary(entry.node).write(to: &writer)
                guard details else { continue }
                try writer.attributes(try vault.attributes(of: entry.node.id))
                try writer.optionalSecret(try vault.property(.label, of: entry.node.id))
            }
        case .node:
            // What stat shows through the mount, which no rule governs.
            let path = try reader.path()
            let node = try vault.node(at: path)
            try NodeSummary(node).write(to: &writer)
            try writer.accessibility(node.kind == .dictionary ? try vault.effectiveDefaultClass(at: path) : nil)
        case .attributes:
            let node = try vault.node(at: try reader.path())
            try admit([.read(UInt64(node.id.rawValue))], caller)
            try writer.attributes(try vault.attributes(of: node.id))
        case .attribute:
            let node = try vault.node(at: try reader.path())
            let name = try reader.attributeName()
            try admit([.read(UInt64(node.id.rawValue))], caller)
            try writer.secret(try vault.attribute(name, of: node.id))
        case .setAttribute, .removeAttribute:
            let path = try reader.path()
            let name = try reader.attributeName()
            let node = try vault.node(at: path)
            try admit([.write(UInt64(node.id.rawValue))], caller)
            if verb == .setAttribute {
                try vault.setAttribute(name, to: try reader.secret(), of: node.id)
            } else {
                try vault.removeAttribute(name, of: node.id)
            }
            served.mountCache?.dropNode(node.id)
        case .label:
            let node = try vault.node(at: try reader.path())
            try admit([.read(UInt64(node.id.rawValue))], caller)
            try writer.optionalSecret(try vault.property(.label, of: node.id))
        case .setLabel:
            let node = try vault.node(at: try reader.path())
            try admit([.write(UInt64(node.id.rawValue))], caller)
            try vault.setProperty(.label, to: try reader.optionalSecret(), of: node.id)
            served.mountCache?.dropNode(node.id)
        case .find:
            let pairs = try reader.attributes()
            let details = try reader.flag()
            let found = try vault.find(pairs).filter { mayFind($0, caller) }
            try writer.integer(UInt32(found.count))
            for path in found {
                try writer.path(path)
                if details { try writer.attributes(try vault.attributes(at: path)) }  // admitted to read it
            }
        case .store:
            let path = try reader.path()
            let content = try reader.secret()
            let attributes = try reader.attributes()
            try admit(try creation(of: path, replacingItem: true), caller)
            let existed = (try? vault.node(at: path)) != nil
            let node = try vault.store(content, at: path, attributes: attributes)
            try dropCached(path, node: existed ? node.id : nil)
        case .remove:
            let path = try reader.path()
            let recursive = try reader.flag()
            try admit(try removal(of: path, recursive: recursive), caller)
            try vault.remove(path, recursive: recursive)
            served.gate.namespaceChanged()
            try dropCached(path, node: nil)
        case .move:
            let source = try reader.path()
            let asked = try reader.path()
            var destination = asked
            // `mv` into a dictionary names the entry there after the source.
            if let existing = try? vault.node(at: destination), existing.kind == .dictionary, let name = source.lastComponent {
                destination = destination.appending(name)
            }
            try admit(try removal(of: source, recursive: false) + (try creation(of: destination, replacingItem: false)), caller)
            try vault.move(source, to: asked)
            served.gate.namespaceChanged()
            try dropCached(source, node: nil)
            try dropCached(destination, node: nil)
        case .makeDictionary:
            let path = try reader.path()
            let intermediates = try reader.flag()
            try admit(try creation(of: path, replacingItem: false), caller)
            try vault.makeDictionary(at: path, withIntermediates: intermediates)
            try dropCached(path, node: nil)
        case .rules:
            let path = try reader.path()
            try admit([.list(try inode(of: path))], caller)
            // A ruled entry inside a dictionary the caller may not list is not shown: its name is.
            let sets = try vault.ruleSets(at: path).filter { (ruled, _) in
                ruled.components.count == path.components.count || mayList(ruled.parent, caller)
            }
            try writer.integer(UInt32(sets.count))
            for (ruled, set) in sets {
                try writer.path(ruled)
                try writer.integer(UInt32(set.rules.count))
                for rule in set.rules { try RuleSummary(rule).write(to: &writer) }
            }
        case .log:
            let since = try reader.flag() ? try reader.integer(Int64.self) : nil
            let after = try reader.flag() ? try reader.integer(Int64.self) : nil
            // Logged when refused only: `log --follow` asks five times a second, and each
            // allowed check recorded would be printed back to it, and push history out.
            try admitEverywhere(caller, recordingAllowed: false)
            let reading = try vault.accessLog(since: since, afterSequence: after)
            try writer.integer(UInt32(reading.entries.count))
            for entry in reading.entries { try AccessLogEntryWire.write(entry, to: &writer) }
            try writer.integer(UInt32(reading.problems.count))
            for problem in reading.problems {
                try writer.text(problem.path)
                try writer.text(problem.reason)
            }
            try writer.flag(reading.lastSequence != nil)
            if let last = reading.lastSequence { try writer.integer(last) }
            try writer.flag(reading.hasMembers)
        case .export:
            throw .invalidArgument("export is streamed")
        }
    }

    /// Every entry, each in a frame as the archive writes it; then the number left out.
    private func export(_ connection: Int32, _ reader: inout ControlReader, _ caller: RequestContext) throws(VaultError) {
        var excluded: Set<AccessibilityClass> = []
        let count = try reader.integer(UInt8.self)
        for _ in 0..<count {
            guard let excluding = try reader.accessibility() else { throw ControlReader.malformed("no class") }
            excluded.insert(excluding)
        }
        try reader.finish()
        // Never exported, whatever the client asks: sealed to this machine.
        excluded.insert(.thisDeviceOnly)
        try admitEverywhere(caller, recordingAllowed: true)
        served.locking.noteActivity()
        ControlSocket.send(connection, "ok 0")
        var record = try SecureBuffer(capacity: 4096)
        let skipped = try served.vault.exportEntries(excluding: excluded) { (entry, _) throws(VaultError) in
            try ArchiveRecord.encode(entry, into: &record)
            try sendFrame(connection, record)
        }
        record.setCount(0)
        try sendFrame(connection, record)
        var writer = try ControlWriter()
        try writer.integer(UInt32(skipped))
        try sendFrame(connection, writer.finish())
    }

    private func sendFrame(_ connection: Int32, _ bytes: borrowing SecureBuffer) throws(VaultError) {
        var length = UInt32(bytes.count).littleEndian
        let sent = withUnsafeBytes(of: &length) { Terminal.writeAll(connection, $0) }
            && bytes.withUnsafeBytes { Terminal.writeAll(connection, $0) }
        guard sent else { throw .storageFailure("the client went away") }
    }

    // MARK: what the rules are asked

    private func inode(of path: VaultPath) throws(VaultError) -> UInt64 {
        UInt64(try served.vault.node(at: path).id.rawValue)
    }

    /// Throws the refusal unless the rules let `caller` have every access, asking on this
    /// connection's own thread when a `--confirm` rule says so.
    private func admit(_ checks: [AccessCheck], _ caller: RequestContext) throws(VaultError) {
        if let refusal = served.gate.admitWaiting(checks, caller) { throw refusal }
    }

    /// What making `path` asks, as create and mkdir do (of each dictionary `store` and `mkdir -p`
    /// create too, the nearest existing one is asked): a write of the entry and of its dictionary;
    /// an item that exists is written instead, as an open for writing does.
    private func creation(of path: VaultPath, replacingItem: Bool) throws(VaultError) -> [AccessCheck] {
        guard let name = path.lastComponent else { throw .invalidName("the root") }
        if replacingItem, let node = try? served.vault.node(at: path), node.kind == .item {
            return [AccessCheck(access: .write, target: .node(node.id), isAlwaysRecorded: true)]
        }
        var parent = path.parent
        var entry = name
        while (try? served.vault.node(at: parent)) == nil, let up = parent.lastComponent {
            entry = up
            parent = parent.parent
        }
        let dictionary = try inode(of: parent)
        return [.change(dictionary, entry), .write(dictionary)]
    }

    /// What removing `path` asks, as unlink and rmdir do; `rm -r` asks it of everything below.
    private func removal(of path: VaultPath, recursive: Bool) throws(VaultError) -> [AccessCheck] {
        guard let name = path.lastComponent else { throw .invalidName("the root") }
        let parent = try inode(of: path.parent)
        var checks: [AccessCheck] = [.change(parent, name), .write(parent)]
        guard recursive, try served.vault.node(at: path).kind == .dictionary else { return checks }
        var pending = [path]
        while let dictionary = pending.popLast() {
            let id = try inode(of: dictionary)
            checks.append(.list(id))
            for entry in try served.vault.list(dictionary) {
                checks.append(.write(id, entry.name))
                if entry.node.kind == .dictionary { pending.append(dictionary.appending(entry.name)) }
            }
            checks.append(.write(id))
        }
        return checks
    }

    /// A read of every node with rules: what the log and an export show is the whole vault, so
    /// every rule must admit the caller (a vault without rules admits everyone).
    private func admitEverywhere(_ caller: RequestContext, recordingAllowed: Bool) throws(VaultError) {
        let ruled = try served.vault.ruleSets().map(\.path)
        var checks: [AccessCheck] = []
        for path in ruled {
            let node = try served.vault.node(at: path)
            let id = NodeID(node.id.rawValue)
            checks.append(AccessCheck(access: .read, target: .node(id), isDescriptorUse: !recordingAllowed))
            if node.kind == .dictionary { checks.append(AccessCheck(access: .list, target: .node(id), isDescriptorUse: !recordingAllowed)) }
        }
        if checks.isEmpty { checks = [.list(UInt64(NodeID.root.rawValue))] }
        try admit(checks, caller)
    }

    /// An item the caller may not read, or in a dictionary it may not list, is not found (a
    /// match would tell it the attribute's value), as in the Secret Service's search; nor is
    /// one a `--confirm` rule governs: the path and attributes `find` prints are not worth a
    /// dialog each, and they are never given unasked.
    private func mayFind(_ path: VaultPath, _ caller: RequestContext) -> Bool {
        guard let item = try? served.vault.node(at: path), let parent = try? served.vault.node(at: path.parent) else { return false }
        if case .allowed = served.gate.evaluate([.list(UInt64(parent.id.rawValue)), .read(UInt64(item.id.rawValue))], caller) {
            return true
        }
        return false
    }

    private func mayList(_ path: VaultPath, _ caller: RequestContext) -> Bool {
        guard let dictionary = try? served.vault.node(at: path) else { return false }
        if case .allowed = served.gate.evaluate([.list(UInt64(dictionary.id.rawValue))], caller) { return true }
        return false
    }

    /// The mount shows a change made here at once, as it shows one made over D-Bus.
    private func dropCached(_ path: VaultPath, node: NodeID?) throws(VaultError) {
        guard let cache = served.mountCache else { return }
        if let node { cache.dropNode(node) }
        var parent = path.parent
        var name = path.lastComponent
        // The nearest dictionary the kernel may have cached an entry of.
        while let entry = name {
            if let dictionary = try? served.vault.node(at: parent) {
                cache.dropEntry(entry, in: dictionary.id)
                cache.dropNode(dictionary.id)
                return
            }
            name = parent.lastComponent
            parent = parent.parent
        }
    }

    /// The payload's bytes, all from the writer of the request line, within 30 s in all;
    /// false on an early end, a late one, or bytes from anyone else. The buffer grows as bytes
    /// come (doubling), so what a client announces is not what it holds.
    func readPayload(_ connection: Int32, into buffer: inout SecureBuffer, exactly count: Int,
                     from sender: MessageSender) throws(VaultError) -> Bool {
        let deadline = FileSystem.monotonicSeconds() + 30
        while buffer.count < count {
            guard FileSystem.monotonicSeconds() <= deadline else { return false }
            try buffer.reserve(min(count, buffer.count + 65536))
            var from: MessageSender? = nil
            let before = buffer.count
            buffer.withUnsafeMutableStorage { storage in
                let room = UnsafeMutableRawBufferPointer(rebasing: storage[before..<min(count, storage.count)])
                let got: Int
                (got, from) = MessageSender.receive(connection, into: room)
                return before + max(got, 0)
            }
            guard buffer.count > before, let from, from.isSameWriter(as: sender) else { return false }
        }
        return true
    }
}
