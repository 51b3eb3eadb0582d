import ArgumentParser
import Support
import VaultCore

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
