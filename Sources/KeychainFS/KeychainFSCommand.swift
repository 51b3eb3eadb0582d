import ArgumentParser
import Glibc

@main
struct KeychainFSCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keychainfs",
        abstract: "An encrypted vault of secrets, usable from the command line or mounted as files.",
        discussion: """
            The vault is --vault PATH, else $KEYCHAINFS_VAULT, else \
            $XDG_DATA_HOME/keychainfs/default.vault (~/.local/share/keychainfs/default.vault).

            Exit statuses:
            \(ExitStatus.summary)
            """,
        version: KeychainFSVersion.current,
        subcommands: [Mount.self, Unmount.self, Lock.self, Unlock.self, Status.self, Init.self, SetItem.self, GetItem.self,
                       AttributeCommand.self, LabelCommand.self, ClassCommand.self, FindItems.self, List.self, Remove.self,
                       MakeDictionary.self, Move.self, Allow.self, Disallow.self, Rules.self, LogCommand.self,
                       ChangePassphrase.self, Verify.self, SecretServiceCommand.self, Exec.self,
                       ImportCommand.self, ExportCommand.self, MemberCommand.self],
        defaultSubcommand: Mount.self
    )

    static func main() {
        ProcessHardening.apply()
        var arguments = Array(CommandLine.arguments.dropFirst())
        do throws(MountHelperArguments.Refusal) {
            let names = Set(configuration.subcommands.map { $0._commandName } + ["help"])
            if let translated = try MountHelperArguments.translate(arguments, subcommands: names) { arguments = translated }
        } catch {
            Terminal.printError(error.message)
            Glibc.exit(ExitStatus.usage.rawValue)
        }
        do {
            var command = try parseAsRoot(arguments)
            try command.run()
        } catch {
            exit(withError: error)
        }
    }
}
