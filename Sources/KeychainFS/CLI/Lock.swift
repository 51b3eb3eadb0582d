import ArgumentParser
import Daemon
import Support

struct Lock: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Lock a mounted vault (or the vault a secret-service serves): wipe its keys and plaintext; everything below the mount answers EACCES."
    )

    @Option(name: .customLong("vault"), help: "Lock the daemon serving this vault (default: the mountpoint's; without one, the default vault's).")
    var vaultPath: String?
    @Argument(help: "The mountpoint.") var mountpoint: String?

    func run() throws {
        try reportingFailures { () throws(CommandFailure) in
            let record = try RunningDaemon.record(mountpoint: mountpoint, vault: vaultPath)
            _ = try ControlSocket.request(socket: record.socketPath, "lock")
        }
    }
}
