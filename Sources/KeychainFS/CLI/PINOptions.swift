import ArgumentParser
import Support
import VaultCore

/// Opening the vault with its TPM PIN slot instead of the passphrase: the PIN from a file, or the terminal.
struct PINOptions: ParsableArguments {
    @Flag(name: .customLong("pin"), help: "Open the vault with its TPM PIN (asked on the terminal) instead of the passphrase.")
    var asked = false

    @Option(name: .customLong("pin-file"),
            help: ArgumentHelp("Read the TPM PIN from FILE ('-' for standard input; one trailing newline is dropped): with it, the vault opens with its TPM PIN slot, and `init --tpm-pin` and `tpm-pin add` take the new PIN from there.", valueName: "FILE"))
    var file: String?

    /// Whether the vault opens with the PIN slot.
    var opensWithPIN: Bool { asked || file != nil }

    /// The PIN, from the file or asked at the terminal (twice with `confirm`: a new PIN).
    func pin(prompt: String = "TPM PIN: ", confirm: Bool = false) throws(VaultError) -> SecureBuffer {
        try SecretInput.pin(file: file, prompt: prompt, confirm: confirm)
    }
}
