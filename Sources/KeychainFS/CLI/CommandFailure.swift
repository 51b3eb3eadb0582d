import ArgumentParser
import VaultCore

/// A failure of the command itself rather than of the vault (mountpoints, daemons).
struct CommandFailure: Error, CustomStringConvertible {
    let message: String
    let status: ExitStatus
    var description: String { message }

    init(message: String, status: ExitStatus) {
        self.message = message
        self.status = status
    }

    init(_ error: VaultError) {
        self.init(message: error.description, status: ExitStatus.code(for: error))
    }
}

extension ParsableCommand {
    /// Runs a command body, turning vault errors into one line on stderr and their exit status.
    func reportingErrors(_ body: () throws(VaultError) -> Void) throws {
        do {
            try body()
        } catch {
            Terminal.printError(error.description)
            throw ExitCode(ExitStatus.code(for: error).rawValue)
        }
    }

    func reportingFailures(_ body: () throws(CommandFailure) -> Void) throws {
        do {
            try body()
        } catch {
            Terminal.printError(error.message)
            throw ExitCode(error.status.rawValue)
        }
    }
}
