import ArgumentParser
import Glibc
import Support
import VaultCore

/// `keychainfs pam-passwd --user NAME`: what pam_keychainfs.so runs once a login password
/// changed, the old password on standard input and the new one on fd 3. Rewraps the vault's
/// key (`keychainfs passwd`) when the old password opens it; a vault with another passphrase
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
            // Both passwords stay in the pipes the module wrote them to: `passwd` reads them there.
            let changed = Subprocess.run(login.program, ["passwd", "--vault", vaultPath, "--passphrase-file", "-",
                                                         "--new-passphrase-file", "/dev/fd/3"], standardInput: 0)
            switch changed.status {
            case ExitStatus.success.rawValue:
                Terminal.printError("the passphrase of \(shown) follows \(user)'s new login password")
            case ExitStatus.wrongPassphrase.rawValue:
                throw CommandFailure(message: "\(shown): its passphrase is not the old login password; left as it was",
                                     status: .wrongPassphrase)
            default:
                throw CommandFailure(message: "cannot change the passphrase of \(shown): "
                    + PAMSession.oneLine(changed.errorOutput), status: .failure)
            }
        }
    }
}
