import ArgumentParser

/// `keychainfs tpm-pin ...`: the vault's TPM PIN slot, beside its passphrase.
struct TPMPINCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tpm-pin",
        abstract: "A short PIN that opens the vault on this machine only, its guessing stopped by the TPM's lockout.",
        discussion: """
            The PIN slot wraps the master key under a key sealed by this machine's TPM to the PIN (and, with \
            --tpm-pcrs, to PCR values) and under the PIN itself through Argon2id. Open with it by --pin or \
            --pin-file FILE (mount -o pinfile=FILE). The passphrase stays the way in when the TPM refuses: \
            after too many wrong PINs (its lockout), once a bound PCR changed, or on another machine.
            """,
        subcommands: [TPMPINAdd.self, TPMPINRemove.self]
    )
}
