import Glibc
import VaultCore

extension VaultError {
    /// The one table from vault errors to the errno a filesystem call returns.
    package var errno: Int32 {
        switch self {
        case .wrongPassphrase, .notAMember, .locked, .accessDenied: return EACCES
        case .wrongPIN, .pinSlotRefused: return EACCES
        case .integrityFailure: return EIO
        case .notFound: return ENOENT
        case .alreadyExists: return EEXIST
        case .notEmpty: return ENOTEMPTY
        case .notADictionary: return ENOTDIR
        case .isADictionary: return EISDIR
        case .invalidName, .invalidMove, .invalidArgument: return EINVAL
        case .nameTooLong: return ENAMETOOLONG
        case .itemTooLarge: return EFBIG
        case .vaultInUse: return EBUSY
        case .diskFull: return ENOSPC
        case .secureMemoryUnavailable: return ENOMEM
        case .storageFailure, .storageUnreachable, .vaultNotFound, .vaultExists, .notAVault, .unknownFormatVersion: return EIO
        case .formatUpgradeFailed: return EIO
        case .noSuchAttribute: return ENODATA
        case .attributeExists: return EEXIST
        case .attributeNameTooLong: return ERANGE
        case .attributeTooLarge: return E2BIG
        case .attributesFull: return ENOSPC
        case .noSuchRule, .noSuchMember: return ENOENT
        // Like a locked item: this machine may not read it.
        case .otherDevice: return EACCES
        case .memberKeyRequired: return EACCES
        case .noKeySlotLeft, .thisDeviceOnlyInTeamVault: return EINVAL
        // The vault's data is older than this machine knows it: stale, as NFS says of a handle.
        case .rolledBack, .recordRolledBack: return ESTALE
        // Served read-only from the replica: a read-only filesystem, as the kernel says of one.
        case .offline: return EROFS
        case .reported: return EIO
        }
    }
}
