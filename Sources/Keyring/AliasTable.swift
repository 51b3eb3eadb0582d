import VaultCore

/// The Secret Service's aliases (`default`, `session`, any a client sets): one property of the
/// vault's root, sealed like any other, holding a line `ALIAS NODE` each. Alias names are
/// `[A-Za-z0-9_]` (they are object path elements), so the text needs no quoting.
enum AliasTable {
    /// Aliases are few (default, session, a handful); the table is one sealed value.
    static let limit = 64

    static func read(_ vault: Vault) throws(VaultError) -> [String: NodeID] {
        guard let value = try vault.property(.aliases, of: .root) else { return [:] }
        let text = value.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        var table: [String: NodeID] = [:]
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count == 2, SecretObject.isValidAlias(String(fields[0])), let id = Int64(fields[1]) else { continue }
            table[String(fields[0])] = NodeID(id)
        }
        return table
    }

    static func write(_ table: [String: NodeID], to vault: Vault) throws(VaultError) {
        let text = table.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value.rawValue)\n" }.joined()
        guard !text.isEmpty else { return try vault.setProperty(.aliases, to: nil, of: .root) }
        var value = try SecureBuffer(capacity: text.utf8.count)
        value.withUnsafeMutableStorage { storage in
            for (offset, byte) in text.utf8.enumerated() { storage[offset] = byte }
            return text.utf8.count
        }
        try vault.setProperty(.aliases, to: value, of: .root)
    }
}
