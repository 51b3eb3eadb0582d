import Daemon
import Support
import VaultCore

/// The daemon `lock`, `unlock` and the commands without a passphrase talk to: the one serving
/// the mountpoint given, else the one serving the vault `--vault` names, else the default
/// vault's (a mount of it, else its Secret Service).
enum RunningDaemon {
    static func record(mountpoint: String?, vault: String?) throws(CommandFailure) -> RuntimeState.MountRecord {
        if let mountpoint {
            let path = Mountpoint.resolved(mountpoint)
            guard let record = RuntimeState.read(mountpoint: path) else {
                throw CommandFailure(message: "\(mountpoint) is not a keychainfs mount", status: .mountFailure)
            }
            return record
        }
        let vaultPath = Mountpoint.absolute(vault ?? VaultOptions.defaultVaultPath())
        guard let record = RuntimeState.daemon(serving: vaultPath) else {
            throw CommandFailure(message: "no keychainfs mount or secret-service serves \(VaultLocation.displayName(vaultPath))",
                                 status: .mountFailure)
        }
        return record
    }
}
