import ArgumentParser
import Daemon
import Glibc
import Support
import VaultCore

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
                       ChangePassphrase.self, Verify.self, SecretServiceCommand.self, Exec.self, PAMSession.self, PAMPasswd.self,
                       ImportCommand.self, ExportCommand.self, MemberCommand.self, TPMPINCommand.self],
        defaultSubcommand: Mount.self
    )

    static func main() {
        ProcessHardening.apply()
        // tpm2-tss logs every refused connection and TPM error to stderr, where `keychainfs`
        // says what failed itself; set once here, before any thread, unless the user asks for
        // its log (TSS2_LOG is read at its first message).
        setenv("TSS2_LOG", "all+NONE", 0)
        refuseArgumentsThatAreNotUTF8()
        var arguments = Array(CommandLine.arguments.dropFirst())
        if BackgroundLaunch.startsDaemon(arguments) { BackgroundLaunch.serveLaunchedRequest() }
        do throws(MountHelperArguments.Refusal) {
            let names = Set(configuration.subcommands.map { $0._commandName } + ["help"])
            if let translated = try MountHelperArguments.translate(arguments, subcommands: names) { arguments = translated }
        } catch {
            Terminal.printError(error.message)
            Glibc.exit(ExitStatus.usage.rawValue)
        }
        do {
            var command = try parseAsRoot(arguments)
            // One setting per process, before anything opens the vault (`OpensVault`).
            if let opening = command as? any OpensVault { OfflineReplicas.isEnabled = !opening.vaultOptions.noOffline }
            try command.run()
        } catch {
            exit(withError: error)
        }
    }

    /// CommandLine.arguments turns bytes that are not UTF-8 into U+FFFD: a name would be
    /// stored changed (the mount refuses it: EINVAL) and a path would name another file. Refused
    /// as the mount refuses such a name, with the status of its errno.
    private static func refuseArgumentsThatAreNotUTF8() {
        for index in 1..<Int(CommandLine.argc) {
            guard let argument = CommandLine.unsafeArgv[index], String(validatingCString: argument) == nil else { continue }
            let refusal = VaultError.invalidName("a name must be valid UTF-8")
            Terminal.printError(refusal.description + " (argument \(index))")
            Glibc.exit(ExitStatus.code(for: refusal).rawValue)
        }
    }
}
