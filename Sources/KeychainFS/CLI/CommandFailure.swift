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

    init(_ error: AccessRuleError) {
        self.init(message: error.description, status: ExitStatus.code(for: error))
    }

    /// Runs a step whose vault error becomes this command's failure.
    static func vault<R>(_ body: () throws(VaultError) -> R) throws(CommandFailure) -> R {
        do { return try body() } catch { throw CommandFailure(error) }
    }

    /// Runs a step whose rule error becomes this command's failure.
    static func rule<R>(_ body: () throws(AccessRuleError) -> R) throws(CommandFailure) -> R {
        do { return try body() } catch { throw CommandFailure(error) }
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
