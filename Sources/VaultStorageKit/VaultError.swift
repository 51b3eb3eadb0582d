/// Every failure VaultCore reports. The CLI maps each case to one exit status and the
/// FUSE driver to one errno, each in a single table; nothing else decides those. Here, below
/// VaultCore, because the storage engines throw it too; its messages are VaultCore's
/// (`VaultError+Description.swift`), which name VaultCore's files and commands.
public enum VaultError: Error, Equatable, Sendable {
    case wrongPassphrase
    /// The TPM refused the PIN offered to the vault's PIN slot, and counted it toward its lockout.
    case wrongPIN
    /// The vault's TPM PIN slot cannot open it on this machine now, whatever the PIN (says why).
    case pinSlotRefused(PINSlotRefusal)
    /// The member key offered opens no key slot of the vault (names the public key).
    case notAMember(String)
    /// A record failed authentication or disagrees with its place; names the path or record.
    case integrityFailure(String)
    case notFound(String)
    case alreadyExists(String)
    case notEmpty(String)
    case notADictionary(String)
    case isADictionary(String)
    case invalidName(String)
    case nameTooLong(String)
    case itemTooLarge(size: Int, limit: Int)
    case invalidMove(String)
    case vaultInUse(String)
    case vaultNotFound(String)
    case vaultExists(String)
    case notAVault(path: String, reason: String)
    case unknownFormatVersion(found: Int, supported: Int)
    /// Opening a vault of an older format could not upgrade it; it was left as it was.
    case formatUpgradeFailed(path: String, version: Int, target: Int, reason: String)
    case locked
    /// An access rule refused the process behind a request (the denial names the process,
    /// never the path).
    case accessDenied(AccessDenial)
    case diskFull
    case storageFailure(String)
    /// The storage's server cannot be reached, closed the connection or stopped answering in
    /// time. Nothing of the call is known to be stored; a commit whose outcome is unknown is
    /// reported so too. Names the server (never a password) and the cause.
    case storageUnreachable(String)
    /// A change asked of a vault served from its offline replica, its server unreachable:
    /// refused, never queued (a server found older than the replica is `.rolledBack` instead).
    /// Names the vault (never a password).
    case offline(String)
    case secureMemoryUnavailable(String)
    case invalidArgument(String)
    /// Names the node (and, for the command line, the attribute); never a value.
    case noSuchAttribute(String)
    case attributeExists(String)
    /// An attribute name over `AttributeName.maximumBytes`.
    case attributeNameTooLong(String)
    case attributeTooLarge(size: Int, limit: Int)
    /// A node's attributes would pass `Vault.maximumAttributeBytesPerNode`.
    case attributesFull(String)
    /// `disallow` of a principal that has no rule at the path (or of `--all` where there is
    /// none); names the path and the principal.
    case noSuchRule(String)
    /// `member remove` of a name with no slot (the name as given).
    case noSuchMember(String)
    /// A this-device-only item whose content does not open with this machine's host key:
    /// sealed on another machine (or damaged). Names the item.
    case otherDevice(String)
    /// A passphrase was offered to a vault that has member slots only (a team vault made by a member).
    case memberKeyRequired
    /// Removing the named member would leave the vault with no key slot at all.
    case noKeySlotLeft(String)
    /// A this-device-only class for an item or a default in a vault with members, or a member
    /// added to a vault that holds such items; says which.
    case thisDeviceOnlyInTeamVault(String)
    /// The vault is at an older generation than this machine last saw of it at that location
    /// (an older file or dump put back, `SeenGenerations`); `--accept-rollback` opens it.
    case rolledBack(path: String, found: Int64, newest: Int64)
    /// This machine's record of the generations seen of the vault at `path` is older than the
    /// TPM's rollback counter for it (`recorded`: the counter's value the record names; nil: the
    /// record is gone or never named one): the record was put back or removed, the vault perhaps
    /// with it. `--accept-rollback` opens it.
    case recordRolledBack(path: String, recorded: UInt64?, counter: UInt64)
    /// A failure a daemon serving the vault reported to the command line that asked it: its
    /// exit status and message, as the daemon's own error mapped them.
    case reported(status: Int32, message: String)
}
