import ArgumentParser
import VaultCore

/// The one table from vault errors to exit statuses (documented in the README and `--help`).
enum ExitStatus {
    static let failure: Int32 = 1
    static let wrongPassphrase: Int32 = 2
    static let integrityFailure: Int32 = 3
    static let notFound: Int32 = 4
    static let alreadyExists: Int32 = 5
    static let wrongKind: Int32 = 6
    static let invalidInput: Int32 = 7
    static let vaultBusy: Int32 = 8
    static let unusableVault: Int32 = 9
    static let storage: Int32 = 10
    static let mountFailure: Int32 = 11
    static let usage: Int32 = 64

    static let summary = """
        0 success, 1 other failure, 2 wrong passphrase, 3 integrity failure, 4 not found (item, dictionary, attribute or match), \
        5 already exists, 6 not empty or wrong kind (item vs dictionary), 7 invalid name, size or argument, \
        8 vault in use (already mounted) or locked, 9 no vault or not a usable vault, 10 storage error (disk full, I/O), \
        11 mount or unmount failure (mountpoint, /dev/fuse), 64 usage.
        """

    static func code(for error: VaultError) -> Int32 {
        switch error {
        case .wrongPassphrase: return wrongPassphrase
        case .integrityFailure: return integrityFailure
        case .notFound: return notFound
        case .alreadyExists, .vaultExists: return alreadyExists
        case .notEmpty, .notADictionary, .isADictionary: return wrongKind
        case .invalidName, .nameTooLong, .itemTooLarge, .invalidMove, .invalidArgument: return invalidInput
        case .vaultInUse, .locked: return vaultBusy
        case .vaultNotFound, .notAVault, .unknownFormatVersion: return unusableVault
        case .diskFull, .storageFailure, .secureMemoryUnavailable: return storage
        case .formatUpgradeFailed: return storage
        case .noSuchAttribute: return notFound
        case .attributeExists: return alreadyExists
        case .attributeNameTooLong, .attributeTooLarge, .attributesFull: return invalidInput
        }
    }
}

/// A failure of the command itself rather than of the vault (mountpoints, daemons).
struct CommandFailure: Error, CustomStringConvertible {
    let message: String
    let status: Int32
    var description: String { message }

    init(message: String, status: Int32) {
        self.message = message
        self.status = status
    }

    init(_ error: VaultError) {
        self.init(message: error.description, status: ExitStatus.code(for: error))
    }
}

extension ParsableCommand {
    /// Runs a command body, turning vault errors into one line on stderr and their exit status.
    func reportingErrors(_ body: () throws(VaultError) -> Void) throws {
        do {
            try body()
        } catch {
            Terminal.printError(error.description)
            throw ExitCode(ExitStatus.code(for: error))
        }
    }

    func reportingFailures(_ body: () throws(CommandFailure) -> Void) throws {
        do {
            try body()
        } catch {
            Terminal.printError(error.message)
            throw ExitCode(error.status)
        }
    }
}
