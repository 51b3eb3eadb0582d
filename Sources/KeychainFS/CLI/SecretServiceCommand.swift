import ArgumentParser
import Daemon
import Support
import VaultCore

struct SecretServiceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "secret-service",
        abstract: "Serve the desktop's keyring API (org.freedesktop.secrets) from the vault, without a mount.",
        discussion: """
            Runs in the foreground until SIGTERM or SIGINT, as D-Bus activation and systemd start it; \
            `keychainfs MOUNTPOINT --secret-service` serves the same beside a mount. With --extpass, the \
            command also answers the unlock prompts clients ask for once the vault is locked.
            """
    )

    @OptionGroup var vault: VaultOptions

    @Flag(help: "Take org.freedesktop.secrets over from the process that owns it.")
    var replace = false

    @Option(name: .customLong("confirm-with"),
            help: ArgumentHelp("Run CMD (sh -c) to ask whether a process may have the access a --confirm rule lets it ask for; exit 0 allows.",
                               valueName: "CMD"))
    var confirmWith: String?

    @Option(name: .customLong("log-days"), help: "Keep the access log for N days (0: no access log).")
    var logDays = AccessLogBounds.defaultDays

    @Option(name: .customLong("log-entries"), help: "Keep at most N access log entries, the newest (0: no access log).")
    var logEntries = AccessLogBounds.defaultEntries

    func run() throws {
        var request = MountRequest(vault: vault.source, mountpoint: "")
        request.confirmCommand = confirmWith
        request.logDays = logDays
        request.logEntries = logEntries
        request.replaceSecretService = replace
        try reportingFailures { () throws(CommandFailure) in try SecretServiceDaemon.serve(request) }
    }
}
