import VaultCore

/// The one table of exit statuses: `--help` is written from it, the README's table is checked
/// against it, and the tests expect its names. A status cannot be added without its meaning.
package enum ExitStatus: Int32, CaseIterable, Sendable {
    case success = 0
    case failure = 1
    case wrongPassphrase = 2
    case integrityFailure = 3
    case notFound = 4
    case alreadyExists = 5
    case wrongKind = 6
    case invalidInput = 7
    case vaultBusy = 8
    case unusableVault = 9
    case storage = 10
    case mountFailure = 11
    case accessDenied = 12
    case otherDevice = 13
    case serviceUnavailable = 14
    case rolledBack = 15
    case pinSlotRefused = 16
    case offline = 17
    /// ArgumentParser's own status for a command line it cannot parse (EX_USAGE).
    case usage = 64

    package var meaning: String {
        switch self {
        case .success: "success"
        case .failure: "other failure"
        case .wrongPassphrase: "wrong passphrase or TPM PIN, or a member key that is not a member of the vault"
        case .integrityFailure: "integrity failure: a record failed authentication (damage or tampering)"
        case .notFound: "no such item, dictionary, attribute, access rule or member; `find` matched nothing; nobody owns org.freedesktop.secrets (`secret-service --status`)"
        case .alreadyExists: "already exists (including `init` on an existing file)"
        case .wrongKind: "dictionary not empty, or an item where a dictionary was needed (or the reverse)"
        case .invalidInput: "invalid name, item or attribute too large, invalid move or argument; an `--exe` that is not an absolute path to a file or that someone other than root could replace, an invalid `--unit`"
        case .vaultBusy: "vault in use (already mounted) or locked"
        case .unusableVault: "no vault, not a vault, or a vault of a newer format"
        case .storage: "storage error: disk full, I/O error, no locked memory, a PostgreSQL server unreachable or not answering in time; an upgrade of an older vault that could not be written (the vault is left unchanged)"
        case .mountFailure: "mount or unmount failure: mountpoint missing, not a directory or not empty, or /dev/fuse unusable"
        case .accessDenied: "access denied by an access rule"
        case .otherDevice: "a this-device-only item sealed with another machine's host key (or damaged)"
        case .serviceUnavailable: "the Secret Service cannot start: no session bus, or org.freedesktop.secrets is owned by another process (see --replace, `secret-service --status`)"
        case .rolledBack: "the vault is older than the newest generation of it this machine has seen (an older file or dump put back), or this machine's record of it is older than its TPM counter; --accept-rollback opens it"
        case .pinSlotRefused: "the TPM PIN slot cannot open the vault here: the TPM's lockout after too many wrong PINs, PCRs that changed (a firmware or Secure Boot update), another machine's TPM or none, or no PIN slot; the passphrase opens it"
        case .offline: "a change refused because a team vault is offline: its PostgreSQL server cannot be reached and the vault is read from its local replica"
        case .usage: "usage error"
        }
    }

    /// The table as `--help` shows it, one status a line.
    package static var summary: String {
        allCases.map { status in
            let number = String(status.rawValue)
            return "  " + number + String(repeating: " ", count: 4 - number.count) + status.meaning
        }.joined(separator: "\n")
    }

    /// A status read back from a daemon's reply; one this build does not know is a failure.
    package init(reported text: some StringProtocol) {
        self = Int32(text).flatMap(ExitStatus.init(rawValue:)) ?? .failure
    }

    package static func code(for error: VaultError) -> ExitStatus {
        switch error {
        case .wrongPassphrase, .notAMember, .wrongPIN: .wrongPassphrase
        case .pinSlotRefused: .pinSlotRefused
        case .integrityFailure: .integrityFailure
        case .notFound: .notFound
        case .alreadyExists, .vaultExists: .alreadyExists
        case .notEmpty, .notADictionary, .isADictionary: .wrongKind
        case .invalidName, .nameTooLong, .itemTooLarge, .invalidMove, .invalidArgument: .invalidInput
        case .vaultInUse, .locked: .vaultBusy
        case .accessDenied: .accessDenied
        case .vaultNotFound, .notAVault, .unknownFormatVersion: .unusableVault
        case .diskFull, .storageFailure, .storageUnreachable, .secureMemoryUnavailable, .formatUpgradeFailed: .storage
        case .noSuchAttribute: .notFound
        case .attributeExists: .alreadyExists
        case .attributeNameTooLong, .attributeTooLarge, .attributesFull: .invalidInput
        case .noSuchRule, .noSuchMember: .notFound
        case .otherDevice: .otherDevice
        case .memberKeyRequired: .wrongPassphrase
        case .noKeySlotLeft, .thisDeviceOnlyInTeamVault: .invalidInput
        case .rolledBack, .recordRolledBack: .rolledBack
        case .offline: .offline
        case .reported(let status, _): ExitStatus(rawValue: status) ?? .failure
        }
    }

    /// Every principal the command line cannot make is invalid input: the file is not there,
    /// is not a file, could be replaced by someone other than root, or the unit name is not one.
    package static func code(for error: AccessRuleError) -> ExitStatus {
        switch error {
        case .executableNotAbsolute, .executableNotFound, .executableNotAFile, .executableReplaceable, .invalidUnit: .invalidInput
        }
    }
}
