import Admission
import DBus
import VaultCore

/// The property values collections and items share (their declarations, in +Collection and
/// +Item, list them). A locked vault still answers what is not secret (Locked, Items,
/// Collections, times). Labels are sealed, so a locked vault shows them empty (clients read
/// Label to see that an object exists, and would fail on an error); attributes and type of a
/// locked item are IsLocked, and GetAll leaves them out.
extension SecretService {
    typealias PropertyValue = (inout BusWriter) throws(BusError) -> Void
    typealias PropertyUpdate = (BusCall) throws(BusError) -> Void

    /// Labels and attributes are what `getfattr` shows through the mount: the same rule
    /// (reading the node) governs them here.
    private func checkSealedReadable(_ node: NodeID, _ caller: RequestContext) throws(BusError) {
        try requireUnlocked()
        switch gate.evaluate([.read(UInt64(node.rawValue))], caller) {
        case .allowed: return
        case .refused(let error): throw BusError(error)
        case .needsConfirmation:
            // Clients read properties in bulk (GetAll after every search): a dialog for each
            // would be noise, and answering unasked would bypass the rule. Refused; the secret
            // itself (GetSecret) is what asks.
            throw .accessDenied("a --confirm rule governs this object: its label and attributes are not shown over D-Bus (its secret is, once confirmed)")
        }
    }

    /// Created and Modified. Nodes keep no birth time: an item's creation is its last content
    /// change's time when nothing later is known, as far as the vault can tell.
    func timeProperty(of node: NodeID) -> PropertyValue {
        { [self] (writer) throws(BusError) in
            let time = try? vault.node(node).attributes.modified
            try writer.uint64(UInt64(max(0, time?.seconds ?? 0)))
        }
    }

    func labelProperty(of node: NodeID, _ caller: RequestContext) throws(BusError) -> PropertyValue {
        if !locking.isLocked { try checkSealedReadable(node, caller) }
        return { [self] (writer) throws(BusError) in
            guard !locking.isLocked else { return try writer.string("") }
            // An item made through the mount or the CLI has no label of its own: its name is.
            let label = try vaultCall { () throws(VaultError) -> SecureBuffer in
                if let label = try vault.property(.label, of: node) { return label }
                if let name = try vault.name(of: node) { return try SecureBuffer.copy(of: name) }
                return try SecureBuffer(capacity: 0)
            }
            try writer.string(secret: label)
        }
    }

    func typeProperty(of node: NodeID, _ caller: RequestContext) throws(BusError) -> PropertyValue {
        try checkSealedReadable(node, caller)
        return { [self] (writer) throws(BusError) in
            let type = try vaultCall { () throws(VaultError) in try vault.property(.contentType, of: node) }
            if let type { try writer.string(secret: type) } else { try writer.string("text/plain") }
        }
    }

    func attributesProperty(of node: NodeID, _ caller: RequestContext) throws(BusError) -> PropertyValue {
        try checkSealedReadable(node, caller)
        return { [self] (writer) throws(BusError) in
            let attributes = try vaultCall { () throws(VaultError) in try vault.attributes(of: node) }
            try writer.open("a", "{ss}")
            // A value set through the mount may be any bytes; D-Bus strings are UTF-8 without
            // NUL. Such an attribute is left out rather than failing the whole reply.
            for attribute in attributes where attribute.value.withUnsafeBytes(BusWriter.isValidString) {
                try writer.open("e", "ss")
                let name = try vaultCall { () throws(VaultError) in try SecureBuffer.copy(of: attribute.name) }
                try writer.string(secret: name)
                try writer.string(secret: attribute.value)
                try writer.close()
            }
            try writer.close()
        }
    }

    /// Set for Label (collections and items), Attributes and Type (items): the new value is
    /// read into locked memory here, inside the variant; the update writes it once the rules
    /// allow.
    func setLabel(of node: NodeID, from reader: inout BusReader, _ caller: RequestContext) throws(BusError) -> PropertyUpdate {
        let update = ItemProperties()
        update.label = try reader.secretString()
        return updating(node, caller) { [self] () throws(VaultError) in try vault.setProperty(.label, to: update.label, of: node) }
    }

    func setType(of node: NodeID, from reader: inout BusReader, _ caller: RequestContext) throws(BusError) -> PropertyUpdate {
        let update = ItemProperties()
        update.contentType = try reader.secretString()
        return updating(node, caller) { [self] () throws(VaultError) in
            try vault.setProperty(.contentType, to: update.contentType, of: node)
        }
    }

    func setAttributes(of node: NodeID, from reader: inout BusReader, _ caller: RequestContext) throws(BusError) -> PropertyUpdate {
        let update = ItemProperties()
        update.attributes = try ItemProperties.readAttributes(&reader)
        return updating(node, caller) { [self] () throws(VaultError) in
            try vault.replaceAttributes(of: node, with: update.attributes ?? [])
        }
    }

    private func updating(_ node: NodeID, _ caller: RequestContext,
                          _ change: @escaping @Sendable () throws(VaultError) -> Void) -> PropertyUpdate {
        { [self] (call) throws(BusError) in
            try requireUnlocked()
            authorize(call, [.write(UInt64(node.rawValue))], for: caller) { [self] () throws(BusError) in
                try vaultCall(change)
                mountCache?.dropNode(node)
                refreshModel()
                call.reply { _ in }
            }
        }
    }
}

extension BusWriter {
    /// Whether bytes can be sent as a D-Bus string: valid UTF-8 without NUL. Checked on the
    /// bytes, no String made of them (they may be secret).
    static func isValidString(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard !bytes.contains(0) else { return false }
        var decoder = UTF8()
        var iterator = bytes.makeIterator()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }
}
