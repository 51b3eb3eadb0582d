import ArgumentParser
import Daemon
import Support
import VaultCore

struct Unlock: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Unlock a locked mount (or the vault a secret-service serves) with the passphrase, or with --pin or --pin-file its TPM PIN.",
        discussion: "An unlocked one stays unlocked (the passphrase is still checked). Exits with status \(ExitStatus.mountFailure.rawValue) when no daemon serves the vault."
    )

    @OptionGroup var secret: PassphraseOptions
    @OptionGroup var tpmPIN: PINOptions
    @Option(name: .customLong("vault"), help: "Unlock the daemon serving this vault (default: the mountpoint's; without one, the default vault's).")
    var vaultPath: String?
    @Argument(help: "The mountpoint.") var mountpoint: String?

    func run() throws {
        try reportingFailures { () throws(CommandFailure) in
            let record = try RunningDaemon.record(mountpoint: mountpoint, vault: vaultPath)
            let passphrase = try tpmPIN.opensWithPIN ? Unlock.pin(tpmPIN) : Unlock.passphrase(secret)
            let request = "unlock \(passphrase.count)" + (tpmPIN.opensWithPIN ? " " + UnlockSecret.pin.rawValue : "")
            _ = try ControlSocket.request(socket: record.socketPath, request) { fd in
                _ = passphrase.withUnsafeBytes { Terminal.writeAll(fd, $0) }
            }
        }
    }
}

extension Unlock {
    static func pin(_ options: PINOptions) throws(CommandFailure) -> SecureBuffer {
        do throws(VaultError) {
            return try options.pin()
        } catch {
            throw CommandFailure(error)
        }
    }

    static func passphrase(_ options: PassphraseOptions) throws(CommandFailure) -> SecureBuffer {
        do throws(VaultError) {
            return try options.passphrase()
        } catch {
            throw CommandFailure(error)
        }
    }
}
