import ArgumentParser
import Daemon
import Support

struct Lock: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Lock a mounted vault: wipe its keys and plaintext; everything below the mount answers EACCES."
    )

    @Argument(help: "The mountpoint.") var mountpoint: String

    func run() throws {
        try reportingFailures { () throws(CommandFailure) in
            _ = try ControlSocket.request(Mountpoint.resolved(mountpoint), "lock")
        }
    }
}
