import CSodium
import Glibc
import StorageSQLite

/// This machine's record of the newest generation it has seen of each vault, by location (the
/// file's real path, or the PostgreSQL URI without its password, with the vault's id): an
/// SQLite file of its own, `$XDG_STATE_HOME/keychainfs/generations.sqlite` (else
/// `~/.local/state/...`, 0600 in 0700 directories), kept by the SQLite engine
/// (`SeenGenerationFile`, so no SQL is written here), one row per vault location, each written
/// in one durable transaction (SQLite's journal makes the replacement atomic, as a temporary
/// file renamed over the old one would). Opening a vault whose generation is older is
/// `.rolledBack` unless accepted, which records the older one as newest.
///
/// Each row carries a MAC under the vault's header key (`RecordCipher.seenMAC`), bound to the
/// location, the generation and the header MAC of the vault when it was written. What that
/// defends: a row edited by another program of the user (a lower generation written in) does not
/// authenticate and is refused as tampering, never believed. What it cannot: such a program can
/// delete the row or the file, and this machine then knows nothing of the vault (as before its
/// first open). A row written before the vault's key was rotated (its header MAC differs) cannot
/// be checked; it still counts as a floor (an older vault is refused) and is replaced.
public enum SeenGenerations {
    public static var path: String {
        let env = { (name: String) -> String? in getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } }
        if let state = env("XDG_STATE_HOME") { return state + "/keychainfs/generations.sqlite" }
        var home = env("HOME")
        if home == nil, let entry = getpwuid(getuid()) { home = String(cString: entry.pointee.pw_dir) }
        return (home ?? "/") + "/.local/state/keychainfs/generations.sqlite"
    }

    /// Where a vault is, as its row names it: a file by its real path (a copy elsewhere is
    /// another vault location), a PostgreSQL vault by its URI without the password.
    static func location(of path: String) -> String {
        guard !VaultLocation.isPostgreSQL(path) else { return VaultLocation.displayName(path) }
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    private static func file() throws(VaultError) -> SeenGenerationFile {
        let path = self.path
        do throws(VaultError) { return try SeenGenerationFile(path: path) } catch {
            throw .storageFailure("this machine's record of vault generations seen, \(path): \(error)")
        }
    }

    /// At open, with the vault's state checked: refuses (`.rolledBack`) a generation older than
    /// the newest seen at `location`, unless `accepting`; then records the newest.
    static func check(location: String, generation: Int64, headerMAC: [UInt8], cipher: RecordCipher,
                      accepting: Bool) throws(VaultError) {
        try update(location: location, generation: generation, headerMAC: headerMAC, cipher: cipher) {
            (recorded, authentic, sameKey) throws(VaultError) -> Int64 in
            if accepting { return generation }
            if sameKey && !authentic {
                throw .integrityFailure("this machine's record of the newest generation seen of \(location) (in \(path)): it was "
                                        + "changed outside keychainfs; --accept-rollback replaces it with the vault's")
            }
            guard let recorded else { return generation }
            guard generation >= recorded else { throw .rolledBack(path: location, found: generation, newest: recorded) }
            return generation
        }
    }

    /// After writes: records `generation` where it is newer than the one recorded.
    static func record(location: String, generation: Int64, headerMAC: [UInt8], cipher: RecordCipher) throws(VaultError) {
        try update(location: location, generation: generation, headerMAC: headerMAC, cipher: cipher) {
            (recorded, authentic, _) throws(VaultError) -> Int64 in
            guard let recorded, authentic else { return generation }
            return max(recorded, generation)
        }
    }

    /// `decide` gets the recorded generation (nil: none, or malformed), whether its MAC holds, and
    /// whether it was written under the vault's current header MAC (true for a malformed row); it
    /// gives the generation to record.
    private static func update(location: String, generation: Int64, headerMAC: [UInt8], cipher: RecordCipher,
                               _ decide: (Int64?, Bool, Bool) throws(VaultError) -> Int64) throws(VaultError) {
        try file().update(location: Array(location.utf8), vaultID: cipher.vaultID) {
            (stored) throws(VaultError) -> SeenGenerationFile.Row? in
            var recorded: Int64? = nil, authentic = false, sameKey = false
            switch stored {
            case .row(let row)?:
                recorded = row.generation
                sameKey = row.headerMAC == headerMAC
                let expected = cipher.seenMAC(location: location, generation: row.generation, headerMAC: row.headerMAC)
                authentic = sameKey && expected.count == row.mac.count && sodium_memcmp(expected, row.mac, row.mac.count) == 0
            case .malformed?:
                sameKey = true  // a malformed row: tampering, as one whose MAC fails
            case nil:
                break
            }
            let newest = try decide(recorded, authentic, sameKey)
            guard newest != recorded || !authentic else { return nil }
            return SeenGenerationFile.Row(generation: newest, headerMAC: headerMAC,
                                          mac: cipher.seenMAC(location: location, generation: newest, headerMAC: headerMAC))
        }
    }
}
