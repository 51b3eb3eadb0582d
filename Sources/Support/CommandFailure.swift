import VaultCore

/// A failure of the command itself rather than of the vault (mountpoints, daemons).
package struct CommandFailure: Error, CustomStringConvertible {
    package let message: String
    package let status: ExitStatus
    package var description: String { message }

    package init(message: String, status: ExitStatus) {
        self.message = message
        self.status = status
    }

    package init(_ error: VaultError) {
        self.init(message: error.description, status: ExitStatus.code(for: error))
    }

    package init(_ error: AccessRuleError) {
        self.init(message: error.description, status: ExitStatus.code(for: error))
    }

    /// Runs a step whose vault error becomes this command's failure.
    package static func vault<R>(_ body: () throws(VaultError) -> R) throws(CommandFailure) -> R {
        do { return try body() } catch { throw CommandFailure(error) }
    }

    /// Runs a step whose rule error becomes this command's failure.
    package static func rule<R>(_ body: () throws(AccessRuleError) -> R) throws(CommandFailure) -> R {
        do { return try body() } catch { throw CommandFailure(error) }
    }
}
