import ArgumentParser
import Daemon
import Glibc
import Support
import VaultCore

struct Exec: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a command with secrets in its environment or as files in a private directory.",
        discussion: """
            --env NAME=PATH sets NAME to the item at PATH. --env-dict DICT sets a variable for each item in DICT, \
            named after the item: letters upper case, any byte other than a letter, digit or '_' made '_', a \
            leading digit preceded by '_' (db-password is DB_PASSWORD). --files DICT writes each item in DICT \
            to a file of its name in a directory made for the command, $KEYCHAINFS_SECRETS_DIR, wiped and \
            removed when the command ends. With the vault mounted and unlocked, the mount's daemon gives the \
            secrets (no passphrase; the access rules judge this process); otherwise the vault is opened with \
            the passphrase. When standard output or error is not a terminal, every secret passed (4 bytes or \
            longer) that the command writes to it is replaced by <concealed by keychainfs>; --no-masking \
            leaves the output as written. The exit status is the command's; a signal that ended it ends exec too.
            """
    )

    @OptionGroup var vault: VaultOptions

    @Option(name: .customLong("env"), help: ArgumentHelp("Set NAME to the item at PATH.", valueName: "NAME=PATH"))
    var variables: [String] = []

    @Option(name: .customLong("env-dict"), help: ArgumentHelp("Set a variable for each item in DICT.", valueName: "DICT"))
    var variableDictionaries: [String] = []

    @Option(name: .customLong("files"), help: ArgumentHelp("Put each item in DICT in a file in $KEYCHAINFS_SECRETS_DIR.", valueName: "DICT"))
    var fileDictionaries: [String] = []

    @Flag(name: .customLong("no-masking"), help: "Leave secrets in the command's output that is not a terminal.")
    var noMasking = false

    @Argument(parsing: .postTerminator, help: ArgumentHelp("The command and its arguments, after --.", valueName: "COMMAND"))
    var command: [String] = []

    func validate() throws {
        guard !command.isEmpty else { throw ValidationError("give the command after --: keychainfs exec [OPTIONS] -- COMMAND ...") }
        for variable in variables {
            guard let equals = variable.firstIndex(of: "="), ExecSecrets.isVariableName(variable[..<equals].utf8),
                  variable.index(after: equals) != variable.endIndex else {
                throw ValidationError("--env takes NAME=PATH, NAME of letters, digits and '_', not starting with a digit")
            }
        }
    }

    func run() throws {
        var termination: ChildProcess.Termination?
        try reportingFailures { () throws(CommandFailure) in
            let secrets = try gather()
            ChildProcess.blockSignals()
            let directory = secrets.hasFiles ? try SecretsDirectory() : nil
            defer { directory?.wipeAndRemove() }
            if let directory { try secrets.writeFiles(into: directory) }
            let relays = try relays(for: secrets)
            // Everything the command wrote is passed on before exec ends (after the wait below).
            defer { relays.forEach { $0.finish() } }
            let pid: pid_t
            do throws(ChildProcess.SpawnFailure) {
                defer { relays.forEach { $0.closeCommandEnd() } }
                pid = try start(secrets, directory: directory, relays: relays)
            } catch {
                Terminal.printError(error.message)
                termination = .exited(error.exitStatus)
                return
            }
            // The secrets' buffer is wiped here: the command has its own copy now.
            _ = consume secrets
            termination = ChildProcess.wait(for: pid)
        }
        if let termination { ChildProcess.end(like: termination) }
    }

    /// A relay for standard output and for error when it is not a terminal: a terminal is
    /// a person reading, as with `op run`, and keeps the command attached to it directly; a
    /// closed stream stays closed.
    private func relays(for secrets: borrowing ExecSecrets) throws(CommandFailure) -> [StreamRelay] {
        let streams = [STDOUT_FILENO, STDERR_FILENO].filter { isatty($0) == 0 && fcntl($0, F_GETFD) != -1 }
        guard !noMasking, !streams.isEmpty else { return [] }
        let mask: OutputMask?
        do throws(VaultError) {
            mask = try secrets.outputMask()
        } catch {
            throw CommandFailure(error)
        }
        guard let mask else { return [] }
        var relays: [StreamRelay] = []
        for stream in streams {
            do throws(CommandFailure) {
                relays.append(try StreamRelay(target: stream, mask: mask))
            } catch {
                relays.forEach { $0.closeCommandEnd(); $0.finish() }
                throw error
            }
        }
        return relays
    }

    /// Starts the command with the variables added to (or replacing those of) exec's own
    /// environment.
    private func start(_ secrets: borrowing ExecSecrets, directory: SecretsDirectory?, relays: [StreamRelay]) throws(ChildProcess.SpawnFailure) -> pid_t {
        let directoryVariable = directory.map { strdup("KEYCHAINFS_SECRETS_DIR=" + $0.path) }
        defer { directoryVariable.map { free($0) } }
        // exec's umask (077, from its hardening) is not the command's business.
        umask(ProcessHardening.inheritedUmask)
        let started: Result<pid_t, ChildProcess.SpawnFailure> = secrets.withEnvironment { ours in
            var environment: [UnsafeMutablePointer<CChar>?] = []
            var index = 0
            while let entry = environ[index] {
                index += 1
                let name = UnsafeRawBufferPointer(start: entry, count: strlen(entry)).prefix { $0 != UInt8(ascii: "=") }
                if secrets.hasVariable(named: name) || name.elementsEqual("KEYCHAINFS_SECRETS_DIR".utf8) { continue }
                environment.append(entry)
            }
            environment += ours.map { Optional($0) }
            if let directoryVariable { environment.append(directoryVariable) }
            environment.append(nil)
            do throws(ChildProcess.SpawnFailure) {
                return .success(try ChildProcess.spawn(command, environment: environment, relays: relays))
            } catch {
                return .failure(error)
            }
        }
        return try started.get()
    }

    /// Every secret asked for, from the mount's daemon when the vault is mounted and unlocked,
    /// else from the vault opened with the passphrase.
    private func gather() throws(CommandFailure) -> ExecSecrets {
        let vaultPath = Mountpoint.absolute(vault.resolvedVaultPath)
        if let daemon = RuntimeState.daemon(serving: vaultPath) {
            ProcessHardening.allowInspectionWithoutKeys()
            do throws(CommandFailure) {
                return try gather(from: .daemon(socket: daemon.socketPath))
            } catch let error where error.status == .vaultBusy {
                // Locked: the passphrase opens the vault file itself, as for any other command.
            }
        }
        try ProcessHardening.closeInspectionBeforeKeys()
        let opened: Vault
        do throws(VaultError) {
            opened = try vault.openVault()
        } catch {
            throw CommandFailure(error)
        }
        return try gather(from: .vault(opened))
    }

    private func gather(from source: SecretSource) throws(CommandFailure) -> ExecSecrets {
        var secrets: ExecSecrets
        do throws(VaultError) {
            secrets = try ExecSecrets()
        } catch {
            throw CommandFailure(error)
        }
        for variable in variables {
            let equals = variable.firstIndex(of: "=")!
            var name = Array(variable[..<equals].utf8)
            let value = try source.read(try Exec.path(String(variable[variable.index(after: equals)...])))
            try secrets.addVariable(&name, value)
        }
        for dictionary in variableDictionaries {
            let path = try Exec.path(dictionary)
            for item in try source.itemNames(in: path) {
                var name = ExecSecrets.variableName(for: item)
                let value = try source.read(path.appending(item))
                try secrets.addVariable(&name, value)
            }
        }
        for dictionary in fileDictionaries {
            let path = try Exec.path(dictionary)
            for item in try source.itemNames(in: path) {
                let content = try source.read(path.appending(item))
                try secrets.addFile(item, content)
            }
        }
        return secrets
    }

    private static func path(_ text: String) throws(CommandFailure) -> VaultPath {
        do throws(VaultError) {
            return try VaultPath(text)
        } catch {
            throw CommandFailure(error)
        }
    }
}
