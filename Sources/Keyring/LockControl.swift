import Admission
import Locking
import Synchronization
import VaultCore

/// Who locks and unlocks the vault the service serves: the mount, when it serves one (a lock
/// must also wipe what the driver caches), else the vault itself. The Secret Service's Lock
/// and Unlock are the mount's lock, so `keychainfs lock` and a D-Bus client see one state.
package protocol LockControl: Sendable {
    var isLocked: Bool { get }
    func lock()
    /// With the passphrase or the TPM PIN, as `kind` says.
    func unlock(_ secret: borrowing SecureBuffer, as kind: UnlockSecret) throws(VaultError)
    /// A client used a secret: the idle lock counts from now.
    func noteActivity()
}

extension LockControl {
    func unlock(passphrase: borrowing SecureBuffer) throws(VaultError) { try unlock(passphrase, as: .passphrase) }
}

/// The lock of a service without a mount: the vault's keys, and the log's entries for it.
package final class VaultLock: LockControl {
    private let vault: Vault
    private let gate: AccessGate
    /// Counts locks: a lock asked for while an unlock derives its keys wins, as on a mount.
    private let locks = OrderedMutex<UInt64>(.vaultLockCount, 0)

    package init(vault: Vault, gate: AccessGate) {
        self.vault = vault
        self.gate = gate
    }

    package var isLocked: Bool { vault.isLocked }

    /// A service without a mount has no idle lock.
    package func noteActivity() {}

    package func lock() {
        let wasLocked = vault.isLocked
        gate.willLock()
        locks.withLock { $0 += 1 }
        vault.lock()
        if !wasLocked { gate.didLock() }
    }

    package func unlock(_ secret: borrowing SecureBuffer, as kind: UnlockSecret) throws(VaultError) {
        let before = locks.withLock { $0 }
        try vault.unlock(secret, as: kind)
        guard locks.withLock({ $0 }) == before else {
            vault.lock()
            throw .locked
        }
        gate.didUnlock()
        gate.refresh()
    }
}
