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
///
/// Where a TPM answers, a monotonic counter in it (`RollbackCounter`) closes what the file
/// alone cannot: the file put back from an older copy (or deleted), with the vault, is refused
/// too (see `update`).
public enum SeenGenerations {
    public static var path: String { XDGBaseDirectory.state.keychainfs + "/generations.sqlite" }

    /// Where a vault is, as its row names it: a file by its real path (a copy elsewhere is
    /// another vault location), a PostgreSQL vault by its URI without the password.
    static func location(of path: String) -> String {
        guard !VaultLocation.isPostgreSQL(path) else { return VaultLocation.displayName(path) }
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    static func file() throws(VaultError) -> SeenGenerationFile {
        let path = self.path
        do throws(VaultError) { return try SeenGenerationFile(path: path) } catch {
            throw .storageFailure("this machine's record of vault generations seen, \(path): \(error)")
        }
    }

    /// At open, with the vault's state checked: refuses (`.rolledBack`) a generation older than
    /// the newest seen at `location`, unless `accepting`; then records the newest.
    static func check(location: String, generation: Int64, headerMAC: [UInt8], cipher: RecordCipher,
                      accepting: Bool) throws(VaultError) {
        try update(location: location, generation: generation, headerMAC: headerMAC, cipher: cipher, refusing: !accepting) {
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
        // The older copy accepted is the one whose log goes on.
        if accepting { SeenLogHeads.forget(location: location, vaultID: cipher.vaultID) }
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
    ///
    /// Where a TPM answers, the row also names the vault's TPM counter (`RollbackCounter`) and
    /// the value it has once the row is written: the row is committed with the count one above
    /// the counter's, then the counter is raised, all under the file's lock. So the newest row
    /// names the counter's value (one above it after a crash between the two), and an older row
    /// put back names less: with `refusing`, that is `.recordRolledBack`, as is a counter that
    /// exists for the vault while no row (or a row naming no counter) does. A TPM that fails or
    /// has no NV space left leaves the record to the file alone, as without a TPM.
    private static func update(location: String, generation: Int64, headerMAC: [UInt8], cipher: RecordCipher, refusing: Bool = false,
                               _ decide: (Int64?, Bool, Bool) throws(VaultError) -> Int64) throws(VaultError) {
        let file = try file()
        try file.locked { () throws(VaultError) in
            let tpm = RollbackCounter(vaultID: cipher.vaultID, location: location, statePath: path)
            let before = try? tpm?.existing()
            let current = try? tpm?.current()
            var written: (handle: UInt32, value: UInt64)? = nil
            try file.update(location: Array(location.utf8), vaultID: cipher.vaultID) {
                (stored) throws(VaultError) -> SeenGenerationFile.Row? in
                var recorded: Int64? = nil, authentic = false, sameKey = false
                var storedCounter: (handle: UInt32, value: UInt64)? = nil
                switch stored {
                case .row(let row)?:
                    recorded = row.generation
                    storedCounter = row.counter
                    sameKey = row.headerMAC == headerMAC
                    let expected = cipher.seenMAC(location: location, generation: row.generation, headerMAC: row.headerMAC, counter: row.counter)
                    authentic = sameKey && expected.count == row.mac.count && sodium_memcmp(expected, row.mac, row.mac.count) == 0
                case .malformed?:
                    sameKey = true  // a malformed row: tampering, as one whose MAC fails
                case nil:
                    break
                }
                let newest = try decide(recorded, authentic, sameKey)
                if refusing, let current, let counted = before.flatMap({ $0.value }) {
                    // A row from before a key rotation cannot be checked; its count, as its
                    // generation, still counts.
                    guard let storedCounter, storedCounter.handle == current.handle else {
                        throw .recordRolledBack(path: location, recorded: nil, counter: counted)
                    }
                    guard storedCounter.value >= current.value else {
                        throw .recordRolledBack(path: location, recorded: storedCounter.value, counter: current.value)
                    }
                }
                let counterCurrent = current.map { current in
                    storedCounter.map { $0.handle == current.handle && $0.value >= current.value } ?? false
                } ?? true
                guard newest != recorded || !authentic || !counterCurrent else { return nil }
                let counter = current.map { (handle: $0.handle, value: $0.value + 1) } ?? (authentic ? storedCounter : nil)
                if current != nil { written = counter }
                return SeenGenerationFile.Row(generation: newest, headerMAC: headerMAC,
                                              mac: cipher.seenMAC(location: location, generation: newest, headerMAC: headerMAC, counter: counter),
                                              counter: counter)
            }
            // After the commit: a crash before it leaves the row one above the counter, which
            // the next update takes as current.
            if let written { _ = try? tpm?.increment(handle: written.handle) }
        }
    }
}
