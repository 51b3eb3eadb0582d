import ArgumentParser
import Daemon
import Glibc
import Support
import VaultCore

/// Where the vault is and how to get its passphrase; shared by every subcommand.
struct VaultOptions: ParsableArguments {
    @Option(name: .customLong("vault"), help: "The vault file (default: $KEYCHAINFS_VAULT, else $XDG_DATA_HOME/keychainfs/default.vault).")
    var vaultPath: String?

    @OptionGroup var secret: PassphraseOptions

    @OptionGroup var tpmPIN: PINOptions

    @Flag(name: .customLong("member"), help: "Open the vault with your member key (the default member key file) instead of a vault passphrase; the passphrase options then give the member key's passphrase.")
    var asMember = false

    @Option(name: .customLong("member-key"), help: ArgumentHelp("Open the vault with the member key in FILE (implies --member).", valueName: "FILE"))
    var memberKeyPath: String?

    @Flag(name: .customLong("accept-rollback"), help: "Open the vault even when it is older than the newest generation of it this machine has seen (an older file or dump put back on purpose), and take its generation as the newest.")
    var acceptRollback = false

    @Flag(name: .customLong("no-offline"), help: "For a vault in PostgreSQL: keep no offline replica of it on this machine and never read one; an unreachable server is then an error (exit status 10).")
    var noOffline = false

    /// The member key file to open the vault with; nil to open it with a vault passphrase.
    var resolvedMemberKeyPath: String? { memberKeyPath ?? (asMember ? MemberKey.defaultPath : nil) }

    /// A location that is neither a file nor a URI this program reads is a usage error, before
    /// anything is opened or created: `--vault`, $KEYCHAINFS_VAULT, and through them mount(8)
    /// and the systemd units.
    func validate() throws {
        if tpmPIN.opensWithPIN && resolvedMemberKeyPath != nil {
            throw ValidationError("--pin and --pin-file open a vault with its TPM PIN slot, --member with a member key: give one")
        }
        if tpmPIN.file == "-" && secret.passphraseFromStandardInput {
            throw ValidationError("standard input cannot carry both the passphrase and the PIN")
        }
        do throws(VaultLocation.Refusal) {
            _ = try VaultLocation(parsing: resolvedVaultPath)
        } catch {
            throw ValidationError(error.message)
        }
    }

    var resolvedVaultPath: String { vaultPath ?? VaultOptions.defaultVaultPath() }

    /// $KEYCHAINFS_VAULT, else $XDG_DATA_HOME/keychainfs/default.vault, else under ~/.local/share.
    static func defaultVaultPath() -> String {
        XDGBaseDirectory.environment("KEYCHAINFS_VAULT") ?? XDGBaseDirectory.data.keychainfs + "/default.vault"
    }

    var passphraseFromStandardInput: Bool { secret.passphraseFromStandardInput }

    func passphrase(prompt: String = "Passphrase: ", confirm: Bool = false) throws(VaultError) -> SecureBuffer {
        try secret.passphrase(prompt: prompt, confirm: confirm)
    }

    func openVault() throws(VaultError) -> Vault {
        let path = resolvedVaultPath
        // Fail on a missing or foreign vault before asking for a passphrase.
        try Vault.checkOpenable(at: path)
        if let memberKeyPath = resolvedMemberKeyPath {
            // The key file's own checks (there, a member key) before its passphrase is asked.
            _ = try MemberKey.publicKey(at: memberKeyPath)
            return try Vault.open(at: path, memberKeyAt: memberKeyPath, passphrase: try passphrase(prompt: "Member passphrase: "),
                                  acceptingRollback: acceptRollback)
        }
        if tpmPIN.opensWithPIN {
            return try Vault.open(at: path, pin: try tpmPIN.pin(), acceptingRollback: acceptRollback)
        }
        let passphrase = try passphrase()
        return try Vault.open(at: path, passphrase: passphrase, acceptingRollback: acceptRollback)
    }
}

extension VaultOptions {
    /// Whether the command line says how to open the vault itself (a passphrase option, a
    /// member key, --accept-rollback): then it is opened directly, daemon or not.
    var opensVaultItself: Bool {
        secret.passphraseFile != nil || secret.passphraseCommand != nil || resolvedMemberKeyPath != nil || acceptRollback
            || tpmPIN.opensWithPIN
    }

    /// The daemon of a running mount or secret-service of the vault, when one serves it and
    /// nothing asks to open the vault itself; else the vault, opened with the passphrase.
    func session() throws(VaultError) -> any VaultSession {
        if !opensVaultItself, let daemon = RuntimeState.daemon(serving: Mountpoint.absolute(resolvedVaultPath)) {
            // So that a daemon of a user other than root can read /proc/PID/exe and judge this
            // process by its rules (see ProcessHardening): this process holds no key.
            ProcessHardening.allowInspectionWithoutKeys()
            return DaemonSession(socket: daemon.socketPath)
        }
        return try openVault()
    }

    /// The vault as a mount's request names it: every path from the root, for a daemon that
    /// leaves the launch directory.
    var source: MountRequest.VaultSource {
        MountRequest.VaultSource(location: Mountpoint.absolute(resolvedVaultPath),
                                 passphraseFile: secret.passphraseFile.map { $0 == "-" ? $0 : MemberKeyOptions.absolute($0) },
                                 passphraseCommand: secret.passphraseCommand,
                                 memberKeyPath: resolvedMemberKeyPath.map(MemberKeyOptions.absolute), acceptRollback: acceptRollback,
                                 noOffline: noOffline,
                                 opensWithPIN: tpmPIN.opensWithPIN,
                                 pinFile: tpmPIN.file.map { $0 == "-" ? $0 : MemberKeyOptions.absolute($0) })
    }
}
