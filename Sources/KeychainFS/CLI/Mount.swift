import ArgumentParser
import Daemon
import FUSEDriver
import Glibc
import Support
import VaultCore

struct Mount: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Mount the vault at MOUNTPOINT (`keychainfs MOUNTPOINT` is the same); creates the vault on first use.",
        discussion: "Returns once the mount serves requests. Unmount with `keychainfs unmount MOUNTPOINT`."
    )

    @OptionGroup var vault: VaultOptions

    /// Every mount option, from `MountOption.all`.
    @OptionGroup var options: MountOptionArguments

    @Argument(help: "An empty directory.")
    var mountpoint: String

    /// What the command line asks for.
    var request: MountRequest {
        get throws {
            var vault = vault
            // Under systemd with LoadCredential=passphrase:FILE, nothing else needs saying.
            if vault.secret.passphraseFile == nil, vault.secret.passphraseCommand == nil,
               let credential = ServiceManager.passphraseCredential() {
                vault.secret.passphraseFile = credential
            }
            var request = MountRequest(vault: vault.source, mountpoint: mountpoint)
            try options.apply(to: &request)
            return request
        }
    }

    func run() throws {
        let request = try request
        if request.foreground { MountDaemon.serve(request, passphraseFD: nil, readyFD: nil) }
        try reportingFailures { () throws(CommandFailure) in
            try BackgroundLaunch.launch(request) { creating throws(VaultError) in
                if request.vault.opensWithPIN {
                    guard !creating else {
                        throw .invalidArgument("\(request.vault.location): no vault here; a TPM PIN opens an existing vault "
                            + "(`keychainfs init --tpm-pin` makes one)")
                    }
                    return try SecretInput.pin(file: request.vault.pinFile, confirm: false)
                }
                return try SecretInput.passphrase(file: request.vault.passphraseFile, command: request.vault.passphraseCommand,
                                           prompt: creating ? "New passphrase for \(request.vault.location): " : "Passphrase: ",
                                           confirm: creating)
            }
        }
    }
}
