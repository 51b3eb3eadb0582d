import ArgumentParser
import Support
import VaultCore

/// How to get the passphrase: a file, a command, or the terminal.
struct PassphraseOptions: ParsableArguments {
    @Option(name: .customLong("passphrase-file"), help: "Read the passphrase from FILE ('-' for standard input); one trailing newline is dropped.")
    var passphraseFile: String?

    @Option(name: .customLong("extpass"), help: "Run COMMAND with /bin/sh and use its standard output as the passphrase.")
    var passphraseCommand: String?

    func validate() throws {
        if passphraseFile != nil && passphraseCommand != nil {
            throw ValidationError("give --passphrase-file or --extpass, not both")
        }
    }

    var passphraseFromStandardInput: Bool { passphraseFile == "-" }

    func passphrase(prompt: String = "Passphrase: ", confirm: Bool = false) throws(VaultError) -> SecureBuffer {
        try SecretInput.passphrase(file: passphraseFile, command: passphraseCommand, prompt: prompt, confirm: confirm)
    }
}
