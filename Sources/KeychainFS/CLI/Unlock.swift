import ArgumentParser
import Daemon
import Support
import VaultCore

struct Unlock: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Unlock a locked mount with the passphrase.")

    @OptionGroup var secret: PassphraseOptions
    @Argument(help: "The mountpoint.") var mountpoint: String

    func run() throws {
        try reportingFailures { () throws(CommandFailure) in
            let path = Mountpoint.resolved(mountpoint)
            guard RuntimeState.read(mountpoint: path) != nil else {
                throw CommandFailure(message: "\(mountpoint) is not a keychainfs mount", status: .mountFailure)
            }
            let passphrase = try Unlock.passphrase(secret)
            _ = try ControlSocket.request(path, "unlock \(passphrase.count)") { fd in
                _ = passphrase.withUnsafeBytes { Terminal.writeAll(fd, $0) }
            }
        }
    }
}

extension Unlock {
    static func passphrase(_ options: PassphraseOptions) throws(CommandFailure) -> SecureBuffer {
        do throws(VaultError) {
            return try options.passphrase()
        } catch {
            throw CommandFailure(error)
        }
    }
}
