import ArgumentParser
import Glibc
import Support
import VaultCore

/// `keychainfs pam-session --user NAME`: what pam_keychainfs.so runs as a session opens, the
/// login password on standard input. Unlocks the daemon serving the user's vault, else mounts
/// the vault where the user (or the module's line) says, with the login password. Exit 0 with
/// nothing to say when there is no vault or nothing to start; 2 when the vault's passphrase is
/// another; the one line on stderr is what the module logs.
struct PAMSession: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "pam-session", shouldDisplay: false)

    @Option var user: String
    @Option var vault: String?
    @Option var mount: String?

    func run() throws {
        try reportingFailures { () throws(CommandFailure) in
            let login = try LoginUser.becoming(user)
            let vaultPath = login.vault(vault)
            guard login.hasVault(vaultPath) else { return }
            let password: SecureBuffer
            do throws(VaultError) { password = try PAMSession.password() } catch { throw CommandFailure(error) }
            guard password.count > 0 else { return }
            let shown = Terminal.printable(vaultPath)
            let unlocked = login.runSelf(["unlock", "--vault", vaultPath, "--passphrase-file", "-"], secret: password)
            switch unlocked.status {
            case ExitStatus.success.rawValue:
                return Terminal.printError("unlocked \(shown) for \(user)")
            case ExitStatus.wrongPassphrase.rawValue:
                throw PAMSession.differs(shown)
            case ExitStatus.mountFailure.rawValue:
                break // no daemon serves it: start the configured mount
            default:
                throw CommandFailure(message: "cannot unlock \(shown): \(PAMSession.oneLine(unlocked.errorOutput))", status: .failure)
            }
            guard let configured = mount ?? PAMSession.configuredMountpoint(login) else { return }
            let mountpoint = login.expanding(configured)
            if access(mountpoint, F_OK) != 0 { _ = mkdir(mountpoint, 0o700) }
            let mounted = login.runSelf(["mount", "--vault", vaultPath, "--passphrase-file", "-", mountpoint], secret: password)
            switch mounted.status {
            case ExitStatus.success.rawValue:
                Terminal.printError("mounted \(shown) at \(Terminal.printable(mountpoint)) for \(user)")
            case ExitStatus.wrongPassphrase.rawValue:
                throw PAMSession.differs(shown)
            default:
                throw CommandFailure(message: "cannot mount \(shown) at \(Terminal.printable(mountpoint)): "
                    + PAMSession.oneLine(mounted.errorOutput), status: .failure)
            }
        }
    }

    /// The login password, as the module wrote it: no newline to drop, at most a passphrase's length.
    static func password(from fd: Int32 = 0) throws(VaultError) -> SecureBuffer {
        var password = try SecureBuffer(capacity: 256)
        guard try SecretInput.read(fd, into: &password, limit: SecretInput.maximumPassphraseBytes) == .complete else {
            throw .invalidArgument("the login password is longer than \(SecretInput.maximumPassphraseBytes) bytes")
        }
        return password
    }

    static func differs(_ vault: String) -> CommandFailure {
        CommandFailure(message: "\(vault): its passphrase is not the login password; left locked (keychainfs unlock)",
                       status: .wrongPassphrase)
    }

    /// The user's own choice of where the login mounts the vault: the first line of
    /// ~/.config/keychainfs/login-mount (XDG_CONFIG_HOME is not set yet at login).
    static func configuredMountpoint(_ login: LoginUser) -> String? {
        guard let file = fopen(login.home + "/.config/keychainfs/login-mount", "r") else { return nil }
        defer { fclose(file) }
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        guard getline(&line, &capacity, file) > 0, let line else { return nil }
        let text = String(cString: line).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        return text.isEmpty ? nil : text
    }

    static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline).joined(separator: "; ")
    }
}
