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

            --status tells who owns org.freedesktop.secrets on the session bus and serves nothing: \
            exit status 0 when it is KeychainFS, 14 when another process, 4 when nobody (then \
            `activatable` says whether D-Bus activation would start a provider).
            """
    )

    @OptionGroup var vault: VaultOptions

    @Flag(help: "Take org.freedesktop.secrets over from the process that owns it.")
    var replace = false

    @Flag(help: "Tell who owns org.freedesktop.secrets on the session bus, and whether it is KeychainFS; serve nothing.")
    var status = false

    @Flag(help: "With --status, print it as JSON.")
    var json = false

    @Option(name: .customLong("confirm-with"),
            help: ArgumentHelp("Run CMD (sh -c) to ask whether a process may have the access a --confirm rule lets it ask for; exit 0 allows.",
                               valueName: "CMD"))
    var confirmWith: String?

    @Option(name: .customLong("log-days"), help: "Keep the access log for N days (0: no access log).")
    var logDays = AccessLogBounds.defaultDays

    @Option(name: .customLong("log-entries"), help: "Keep at most N access log entries, the newest (0: no access log).")
    var logEntries = AccessLogBounds.defaultEntries

    func validate() throws {
        if json && !status { throw ValidationError("--json goes with --status") }
    }

    func run() throws {
        if status { return try reportingFailures { () throws(CommandFailure) in try reportStatus() } }
        var request = MountRequest(vault: vault.source, mountpoint: "")
        request.confirmCommand = confirmWith
        request.logDays = logDays
        request.logEntries = logEntries
        request.replaceSecretService = replace
        try reportingFailures { () throws(CommandFailure) in try SecretServiceDaemon.serve(request) }
    }

    private func reportStatus() throws(CommandFailure) {
        let now = try SecretServiceOwnership.onSessionBus()
        if json {
            try CommandFailure.vault { () throws(VaultError) in try JSONOutput.write(SecretServiceStatusJSON(now)) }
        } else {
            var lines: [String] = []
            if let owner = now.owner {
                let process = owner.pid.map { "pid \($0)" + (now.command.map { " (\(Terminal.printable($0)))" } ?? "") } ?? "an unknown process"
                lines.append("owner: \(owner.uniqueName), \(process)" + (now.executable.map { ", " + Terminal.printable($0) } ?? ""))
                lines.append("ours: " + (now.isKeychainFS ? "yes, vault " + Terminal.printable(now.vault ?? "(the default or $KEYCHAINFS_VAULT)") : "no"))
            } else {
                lines.append("owner: nobody")
            }
            lines.append("activatable: " + (now.activatable ? "yes (the bus starts the program its activation file names)" : "no"))
            Terminal.writeAll(1, lines.joined(separator: "\n") + "\n")
        }
        guard now.owner != nil else { throw CommandFailure(message: "nobody owns org.freedesktop.secrets", status: .notFound) }
        guard now.isKeychainFS else { throw CommandFailure(message: "org.freedesktop.secrets is owned by another process", status: .serviceUnavailable) }
    }
}
