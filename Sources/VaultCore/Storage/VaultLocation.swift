import StoragePostgres
import StorageSQLite

/// Where a vault is, parsed once from what the user wrote: a PostgreSQL connection URI
/// (`postgresql://` or `postgres://`, as libpq reads them, the vault's name after `#`) or a
/// file path. Whatever looks like another kind of location (another scheme, a scheme libpq
/// does not read such as `postgresql:/x` or `PostgreSQL://`, a libpq `key=value` string) is
/// refused, never taken for a file of that name: `./NAME` says a file is meant.
public enum VaultLocation: Sendable, Equatable {
    case file(String)
    case postgreSQL(String)

    public struct Refusal: Error, Sendable, Equatable {
        public let message: String
    }

    public init(parsing text: String) throws(Refusal) {
        if PostgresLocation.isPostgreSQL(text) {
            self = .postgreSQL(text)
            return
        }
        let shown = text.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "?" : String($0) }.joined()
        guard !text.isEmpty else { throw Refusal(message: "the vault location is empty") }
        if let scheme = VaultLocation.schemePrefix(text) {
            let postgres = ["postgresql", "postgres"].contains(scheme.lowercased())
            throw Refusal(message: "'\(shown)' is not a vault location: "
                + (postgres ? "a PostgreSQL vault is written postgresql://[user@host]/database[?...][#name] (lower case, two slashes)"
                            : "the only URIs read are postgresql:// and postgres://")
                + "; for a file of that name write ./\(shown)")
        }
        if VaultLocation.looksLikeConnectionString(text) {
            throw Refusal(message: "'\(shown)' is a libpq key=value connection string: write the vault as a URI, "
                + "postgresql://[user@host]/database[?...][#name]; for a file of that name write ./\(shown)")
        }
        self = .file(text)
    }

    /// The text it was parsed from: what libpq or the filesystem is given.
    public var text: String {
        switch self {
        case .file(let path), .postgreSQL(let path): path
        }
    }

    public var isPostgreSQL: Bool {
        if case .postgreSQL = self { return true }
        return false
    }

    /// `scheme:` at the start (RFC 3986: a letter, then letters, digits, `+`, `-`, `.`).
    private static func schemePrefix(_ text: String) -> String? {
        guard let colon = text.firstIndex(of: ":") else { return nil }
        let scheme = text[..<colon].unicodeScalars
        let letter = { (c: Unicode.Scalar) in ("a"..."z").contains(c) || ("A"..."Z").contains(c) }
        guard let first = scheme.first, letter(first),
              scheme.allSatisfy({ letter($0) || ("0"..."9").contains($0) || $0 == "+" || $0 == "-" || $0 == "." }) else { return nil }
        return String(text[..<colon])
    }

    /// `keyword=value` first, as libpq's connection strings (`host=... dbname=...`) start.
    private static func looksLikeConnectionString(_ text: String) -> Bool {
        let trimmed = text.drop { $0 == " " || $0 == "\t" }
        guard let equals = trimmed.firstIndex(of: "=") else { return false }
        let keyword = trimmed[..<equals].reversed().drop { $0 == " " || $0 == "\t" }
        return !keyword.isEmpty && keyword.allSatisfy { $0.isASCII && ($0.isLetter || $0 == "_") }
    }

    /// Whether `path` is a PostgreSQL URI (false for anything else, refused or not).
    public static func isPostgreSQL(_ path: String) -> Bool { PostgresLocation.isPostgreSQL(path) }

    /// The path as messages and logs show it: a URI without its password.
    public static func displayName(_ path: String) -> String {
        guard isPostgreSQL(path) else { return path }
        return (try? PostgresLocation(path).displayName) ?? "a PostgreSQL vault"
    }

    /// Every storage is reached through the type, whoever gives the path.
    private static func parsed(_ path: String) throws(VaultError) -> VaultLocation {
        do throws(Refusal) { return try VaultLocation(parsing: path) } catch { throw .invalidArgument(error.message) }
    }

    static func createStorage(at path: String, _ populate: (any VaultStorage) throws(VaultError) -> Void) throws(VaultError) -> any VaultStorage {
        switch try parsed(path) {
        case .postgreSQL(let uri):
            guard OfflineReplicas.isEnabled else {
                return try PostgresStorage.create(at: uri) { (storage) throws(VaultError) in try populate(storage) }
            }
            return try ReplicatedStorage.create(at: uri) { (storage) throws(VaultError) in try populate(storage) }
        case .file(let file):
            return try SQLiteStorage.create(at: file) { (storage) throws(VaultError) in try populate(storage) }
        }
    }

    static func openStorage(at path: String) throws(VaultError) -> any VaultStorage {
        switch try parsed(path) {
        case .postgreSQL(let uri): OfflineReplicas.isEnabled ? try ReplicatedStorage.open(at: uri) : try PostgresStorage.open(at: uri)
        case .file(let file): try SQLiteStorage.open(at: file)
        }
    }
}
