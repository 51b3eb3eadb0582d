import VaultStorageKit
/// Where a vault in PostgreSQL is: a libpq connection URI, and after `#` the vault's name
/// within that database ("default" when there is no fragment). libpq never sees the fragment:
/// the name scopes every row, so several vaults share one database.
package struct PostgresLocation {
    /// What libpq connects with.
    let uri: String
    let vaultName: String
    /// The URI without its password, for messages.
    package let displayName: String
    /// How long one statement may wait for the server before the call fails and the
    /// connection is dropped: `keychainfs_timeout=SECONDS` in the URI's query.
    let queryTimeoutSeconds: Int

    static let defaultVaultName = "default"
    static let defaultQueryTimeoutSeconds = 10
    static let queryTimeoutParameter = "keychainfs_timeout"

    package static func isPostgreSQL(_ path: String) -> Bool {
        path.hasPrefix("postgresql://") || path.hasPrefix("postgres://")
    }

    package init(_ path: String) throws(VaultError) {
        var uri = Substring(path)
        var name = Substring(PostgresLocation.defaultVaultName)
        if let hash = path.firstIndex(of: "#") {
            uri = path[..<hash]
            name = path[path.index(after: hash)...]
        }
        // Part of a channel name and of messages: kept to what needs no quoting anywhere.
        guard (1...40).contains(name.utf8.count),
              name.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x5F || $0 == 0x2D }) else {
            throw .invalidArgument("a PostgreSQL vault's name (after #) is 1 to 40 of a-z, 0-9, _ and -")
        }
        (self.uri, queryTimeoutSeconds) = try PostgresLocation.takingQueryTimeout(String(uri))
        vaultName = String(name)
        displayName = PostgresLocation.withoutPassword(String(uri)) + "#" + name
    }

    /// The URI without our own parameter (libpq refuses keys it does not know), and its value.
    private static func takingQueryTimeout(_ uri: String) throws(VaultError) -> (String, Int) {
        guard let question = uri.firstIndex(of: "?") else { return (uri, defaultQueryTimeoutSeconds) }
        var seconds = defaultQueryTimeoutSeconds
        var kept: [Substring] = []
        for parameter in uri[uri.index(after: question)...].split(separator: "&") {
            guard parameter.hasPrefix(queryTimeoutParameter + "=") else {
                kept.append(parameter)
                continue
            }
            guard let value = Int(parameter.dropFirst(queryTimeoutParameter.count + 1)), (1...3600).contains(value) else {
                throw .invalidArgument("\(queryTimeoutParameter) in a PostgreSQL URI is a number of seconds from 1 to 3600")
            }
            seconds = value
        }
        let base = String(uri[..<question])
        return (kept.isEmpty ? base : base + "?" + kept.joined(separator: "&"), seconds)
    }

    /// `scheme://user:password@host...?password=...` as `scheme://user@host...`: libpq takes a
    /// password in either place (and a client key's in `sslpassword`).
    private static func withoutPassword(_ uri: String) -> String {
        guard let colonSlashSlash = uri.firstIndex(of: ":") else { return uri }
        let authorityStart = uri.index(colonSlashSlash, offsetBy: 3, limitedBy: uri.endIndex) ?? uri.endIndex
        let rest = uri[authorityStart...]
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        var authority = rest[..<authorityEnd]
        if let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") {
            authority = authority[..<colon] + authority[at...]
        }
        var path = rest[authorityEnd...]
        if let question = path.firstIndex(of: "?") {
            let kept = path[path.index(after: question)...].split(separator: "&").filter {
                !$0.hasPrefix("password=") && !$0.hasPrefix("sslpassword=")
            }
            path = path[..<question] + (kept.isEmpty ? "" : "?" + kept.joined(separator: "&"))
        }
        return String(uri[..<authorityStart]) + authority + path
    }

    /// The LISTEN/NOTIFY channel of this vault's changes.
    var channel: String { "keychainfs_" + vaultName }
}
