import ArgumentParser
import Glibc
import Support
import VaultCore

/// `keychainfs pam-passwd --user NAME`: what pam_keychainfs.so runs once a login password
/// changed, the old password on standard input and the new one on fd 3. Rewraps the vault's
/// key (as `keychainfs passwd` does) when the old password opens it; a vault with another passphrase
/// is left as it was (exit 2, one line).
struct PAMPasswd: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "pam-passwd", shouldDisplay: false)

    @Option var user: String
    @Option var vault: String?
    @Option var mount: String?

    func run() throws {
        try reportingFailures { () throws(CommandFailure) in
            let login = try LoginUser.becoming(user, keepingDescriptorsBelow: 4)
            let vaultPath = login.vault(vault)
            guard login.hasVault(vaultPath) else { return }
            let shown = Terminal.printable(vaultPath)
            // In this process: a keychainfs is not dumpable, so a child could not open /dev/fd/3.
            do throws(VaultError) {
                let old = try PAMSession.password(from: 0)
                let new = try PAMSession.password(from: 3)
                guard old.count > 0, new.count > 0 else { return }
                let vault = try Vault.open(at: vaultPath, passphrase: old, acceptingRollback: false)
                try vault.changePassphrase(to: new, kdf: nil)
                Terminal.printError("the passphrase of \(shown) follows \(user)'s new login password")
            } catch .wrongPassphrase {
                throw CommandFailure(message: "\(shown): its passphrase is not the old login password; left as it was",
                                     status: .wrongPassphrase)
            } catch {
                throw CommandFailure(message: "cannot change the passphrase of \(shown): \(error.description)",
                                     status: ExitStatus.code(for: error))
            }
        }
    }
}
