extension VaultError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .wrongPassphrase:
            return "wrong passphrase"
        case .wrongPIN:
            return "wrong PIN (the TPM counts each wrong PIN toward its lockout; the passphrase opens the vault whatever the TPM says)"
        case .pinSlotRefused(let refusal):
            return refusal.description
        case .notAMember(let publicKey):
            return "member key \(publicKey) is not a member of this vault (`keychainfs member add` by a member adds it)"
        case .integrityFailure(let what):
            return "integrity failure: \(what) failed authentication (the vault was damaged or tampered with)"
        case .notFound(let path):
            return "\(path): no such item or dictionary"
        case .alreadyExists(let path):
            return "\(path): already exists"
        case .notEmpty(let path):
            return "\(path): dictionary is not empty"
        case .notADictionary(let path):
            return "\(path): not a dictionary"
        case .isADictionary(let path):
            return "\(path): is a dictionary"
        case .invalidName(let reason), .nameTooLong(let reason):
            return "invalid name: \(reason)"
        case .itemTooLarge(let size, let limit):
            return "item too large: \(size) bytes exceeds this vault's limit of \(limit) bytes"
        case .invalidMove(let reason):
            return "invalid move: \(reason)"
        case .vaultInUse(let path):
            return "\(path): vault is already mounted or in use by another keychainfs process"
        case .vaultNotFound(let path):
            return "\(path): no vault here (create one with `keychainfs init`)"
        case .vaultExists(let path):
            let what = VaultLocation.isPostgreSQL(path) ? "a vault of that name" : "a file"
            return "\(path): \(what) already exists there; refusing to overwrite it"
        case .notAVault(let path, let reason):
            return "\(path): not a KeychainFS vault (\(reason))"
        case .unknownFormatVersion(let found, let supported):
            return "vault format version \(found) is newer than this keychainfs supports (\(supported)); upgrade keychainfs"
        case .formatUpgradeFailed(let path, let version, let target, let reason):
            return "\(path): cannot upgrade the vault from format version \(version) to \(target) (\(reason)); "
                + "the vault is unchanged and still format version \(version)"
        case .accessDenied(let denial):
            return "access denied: \(denial)"
        case .locked:
            return "the vault is locked"
        case .diskFull:
            return "no space left on the device holding the vault; nothing was changed"
        case .storageFailure(let detail):
            return "storage error: \(detail)"
        case .storageUnreachable(let detail):
            return "storage unreachable: \(detail)"
        case .offline(let vault):
            return "\(vault) is offline: its server cannot be reached, and the local replica it is read from takes no changes "
                + "(nothing is queued; change it again once `keychainfs status` no longer says offline)"
        case .secureMemoryUnavailable(let detail):
            return "cannot allocate locked memory for secrets (\(detail)); raise the locked-memory limit (ulimit -l)"
        case .invalidArgument(let detail):
            return detail
        case .noSuchAttribute(let what):
            return "\(what): no such attribute"
        case .attributeExists(let what):
            return "\(what): attribute already exists"
        case .attributeNameTooLong(let reason):
            return "invalid attribute name: \(reason)"
        case .attributeTooLarge(let size, let limit):
            return "attribute value too large: \(size) bytes exceeds the limit of \(limit) bytes"
        case .attributesFull(let what):
            return "\(what): no room for this attribute (a node's attributes, names and values, are at most "
                + "\(VaultFormat.maximumAttributeBytesPerNode) bytes together)"
        case .noSuchMember(let name):
            return "no member named \(name) (see `keychainfs member list`)"
        case .noSuchRule(let what):
            return "\(what): no such access rule"
        case .otherDevice(let what):
            return "\(what): this item is this-device-only and cannot be read on this machine: it was sealed with another "
                + "machine's host key (this machine's: \(HostKey.holder.description)), or its record was damaged"
        case .memberKeyRequired:
            return "this vault opens only with a member key: use --member (or --member-key FILE)"
        case .noKeySlotLeft(let name):
            return "removing member \(name) would leave no way to open the vault (no other member, and no passphrase "
                + "slot it could keep); add another member first"
        case .thisDeviceOnlyInTeamVault(let what):
            return what
        case .reported(_, let message):
            return message
        case .rolledBack(let path, let found, let newest):
            return "\(path): the vault is at generation \(found), older than generation \(newest), the newest this machine has seen "
                + "of it (\(SeenGenerations.path)): an older copy of the vault was put back, and every change since is gone. "
                + "If that is what you meant, open it once with --accept-rollback (mount -o accept_rollback)"
        case .recordRolledBack(let path, let recorded, let counter):
            return "\(path): this machine's record of the newest generation seen of it (\(SeenGenerations.path)) "
                + (recorded.map { "was written at count \($0) of its TPM rollback counter, which is at \(counter) now" }
                   ?? "is gone or names no TPM rollback counter, while the TPM's counter for it is at \(counter)")
                + ": the record was put back from an older copy or removed, and the vault may be an older copy too. "
                + "If that is what you meant, open it once with --accept-rollback (mount -o accept_rollback)"
        }
    }
}
