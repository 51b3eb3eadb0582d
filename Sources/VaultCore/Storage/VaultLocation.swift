/// Which storage a vault's path names: a PostgreSQL connection URI (`postgresql://` or
/// `postgres://`, the vault's name after `#`) or else an SQLite file.
public enum VaultLocation {
    public static func isPostgreSQL(_ path: String) -> Bool { PostgresLocation.isPostgreSQL(path) }

    /// The path as messages and logs show it: a URI without its password.
    public static func displayName(_ path: String) -> String {
        guard isPostgreSQL(path) else { return path }
        return (try? PostgresLocation(path).displayName) ?? "a PostgreSQL vault"
    }

    static func createStorage(at path: String, _ populate: (any VaultStorage) throws(VaultError) -> Void) throws(VaultError) -> any VaultStorage {
        if isPostgreSQL(path) {
            return try PostgresStorage.create(at: path) { (storage) throws(VaultError) in try populate(storage) }
        }
        return try SQLiteStorage.create(at: path) { (storage) throws(VaultError) in try populate(storage) }
    }

    static func openStorage(at path: String) throws(VaultError) -> any VaultStorage {
        isPostgreSQL(path) ? try PostgresStorage.open(at: path) : try SQLiteStorage.open(at: path)
    }
}
