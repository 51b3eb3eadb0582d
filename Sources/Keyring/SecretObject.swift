import VaultCore

/// The objects the service exports, as their D-Bus paths name them. Collections and items are
/// named by node number, never by name: names are secrets, and signals reach every client of
/// the bus. `/aliases/NAME` stands for the collection an alias points to, as libsecret expects
/// (it calls CreateItem on `/org/freedesktop/secrets/aliases/default` directly).
enum SecretObject: Equatable, Sendable {
    case service
    /// `/collection`, `/aliases`, `/session`, `/prompt`: nothing but their children, for
    /// tools that walk the tree (busctl tree, gdbus introspect -r).
    case directory(String)
    case collection(NodeID)
    case alias(String)
    case item(collection: NodeID, item: NodeID)
    case session(UInt64)
    case prompt(UInt64)

    static let root = "/org/freedesktop/secrets"
    /// What a method returns for "no object" (no prompt, no collection).
    static let none = "/"

    init?(path: String) {
        guard path == SecretObject.root || path.hasPrefix(SecretObject.root + "/") else { return nil }
        let parts = path.dropFirst(SecretObject.root.count).split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        func number(_ part: Substring) -> Int64? {
            guard let first = part.first, first != "0", part.allSatisfy(\.isASCII), let value = Int64(part), value > 0 else { return nil }
            return value
        }
        switch (parts.first, parts.count) {
        case (nil, _):
            self = .service
        case (let first?, 1) where SecretObject.directories.contains(String(first)):
            self = .directory(String(first))
        case ("collection", 2):
            guard let id = number(parts[parts.startIndex + 1]) else { return nil }
            self = .collection(NodeID(id))
        case ("collection", 3):
            guard let collection = number(parts[parts.startIndex + 1]), let item = number(parts[parts.startIndex + 2]) else { return nil }
            self = .item(collection: NodeID(collection), item: NodeID(item))
        case ("aliases", 2):
            let name = parts[parts.startIndex + 1]
            guard !name.isEmpty else { return nil }
            self = .alias(String(name))
        case ("session", 2):
            guard let id = number(parts[parts.startIndex + 1]) else { return nil }
            self = .session(UInt64(id))
        case ("prompt", 2):
            guard let id = number(parts[parts.startIndex + 1]) else { return nil }
            self = .prompt(UInt64(id))
        default:
            return nil
        }
    }

    var path: String {
        switch self {
        case .service: SecretObject.root
        case .directory(let name): "\(SecretObject.root)/\(name)"
        case .collection(let id): "\(SecretObject.root)/collection/\(id.rawValue)"
        case .alias(let name): "\(SecretObject.root)/aliases/\(name)"
        case .item(let collection, let item): "\(SecretObject.root)/collection/\(collection.rawValue)/\(item.rawValue)"
        case .session(let id): "\(SecretObject.root)/session/\(id)"
        case .prompt(let id): "\(SecretObject.root)/prompt/\(id)"
        }
    }

    static let directories = ["collection", "aliases", "session", "prompt"]

    /// An alias name as D-Bus object path elements allow it: `[A-Za-z0-9_]`, not empty.
    static func isValidAlias(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 64 && name.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x5F
        }
    }
}
