import StorageSQLite

/// This machine's record of the newest access log batch it saw of one vault (written by this
/// machine's mounts and commands, or read by `log` and `verify`), beside the generations seen
/// (`SeenGenerations`, the same file, a table of its own). Why: deleting the newest batches
/// leaves no gap and no broken chain behind (the next batch chains onto what is left), so only
/// someone who saw them can tell; a later reading that ends before the recorded batch, or has
/// another batch there, is refused as a deletion.
///
/// Kept without a MAC: a program of the user that can edit this file can as well delete it,
/// and this machine then knows of no batch (as before its first). Failures to read or write it
/// are not the log's: the log is read and written as without it. One value opens the file once
/// for the read before a log transaction and the record after it.
struct SeenLogHeads {
    private let file: SeenGenerationFile
    private let location: [UInt8]
    private let vaultID: [UInt8]

    /// nil when the file cannot be opened (or made).
    init?(location: String, vaultID: [UInt8]) {
        guard let file = try? SeenGenerations.file() else { return nil }
        self.file = file
        self.location = Array(location.utf8)
        self.vaultID = vaultID
    }

    var recorded: LogHead? {
        guard let head = try? file.logHead(location: location, vaultID: vaultID) else { return nil }
        return LogHead(sequence: head.sequence, digest: head.digest)
    }

    func record(_ head: LogHead) {
        try? file.recordLogHead(location: location, vaultID: vaultID, sequence: head.sequence, digest: head.digest)
    }

    /// With an older copy of the vault accepted (`--accept-rollback`): its log is the one to go on from.
    static func forget(location: String, vaultID: [UInt8]) {
        guard let file = try? SeenGenerations.file() else { return }
        try? file.forgetLogHead(location: Array(location.utf8), vaultID: vaultID)
    }
}
