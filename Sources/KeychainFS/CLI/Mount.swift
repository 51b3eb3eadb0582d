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

    @Flag(name: [.customShort("f"), .long], help: "Stay in the foreground (for systemd).")
    var foreground = false

    @Option(help: "Argon2id cost when the vault is created by this mount.")
    var kdf: KDFPreset = .moderate

    @Option(name: .customLong("idle-lock"), help: "Lock after this long without any access (30s, 15m, 1h).")
    var idleLock: String?

    @Option(name: .customLong("confirm-with"),
            help: ArgumentHelp("Run CMD (sh -c) to ask whether a process may have the access a --confirm rule lets it ask for; exit 0 allows.",
                               valueName: "CMD"))
    var confirmWith: String?

    @Option(name: .customLong("confirm-remember"), help: "How long a yes holds for its process and rule (default 5m); a no holds for its executable and rule, at most 30 s.")
    var confirmRemember: String = "5m"

    /// Tests only: how long a confirmation command may take (seconds), instead of 30.
    @Option(name: .customLong("confirm-timeout"), help: .private)
    var confirmTimeout: Int?
    @Option(name: .customLong("log-days"), help: "Keep the access log for N days (0: no access log).")
    var logDays = AccessLogBounds.defaultDays

    @Option(name: .customLong("log-entries"), help: "Keep at most N access log entries, the newest (0: no access log).")
    var logEntries = AccessLogBounds.defaultEntries

    @Flag(name: .customLong("secret-service"),
          help: "Also serve the desktop's keyring API (org.freedesktop.secrets) on the session bus while mounted.")
    var secretService = false

    @Flag(help: "With --secret-service: take org.freedesktop.secrets over from the process that owns it.")
    var replace = false

    @Flag(name: .customLong("lock-on-screen-lock"),
          help: "Lock when logind (system bus) locks the session or the machine is about to sleep.")
    var lockOnScreenLock = false

    @Flag(name: .customLong("sync"),
          help: "Make every change durable before its call returns (mkdir, rmdir, unlink, rename, chmod too; by default within 50 ms or at fsync).")
    var syncEveryChange = false

    @Option(name: .customLong("sync-window-ms"), help: .private)
    var syncWindowMilliseconds: Int?

    @Option(name: .customLong("busy-poll-us"),
            help: "How long the daemon keeps asking for the next request after answering one, before it sleeps (microseconds; 0: sleep at once). Each request then skips a wake-up; the cost is CPU while a program works the mount.")
    var busyPollMicroseconds: Int = FUSESession.defaultBusyPollMicroseconds

    @Option(name: .customLong("remount-wait"),
            help: "When the vault's previous daemon, its mount already gone, is still storing and wiping, wait this long for it (default 10s; 0: refuse at once). A vault another mount serves is refused at once.")
    var remountWait = "\(MountRequest.defaultRemountWaitSeconds)s"

    @Flag(name: [.customShort("q"), .long], help: "Print nothing on success (a mount(8) helper's way; the `VAULT MOUNTPOINT -o OPTIONS` form is always quiet).")
    var quiet = false

    @Option(name: .customLong("ready-fd"), help: .private)
    var readyFD: Int32?

    @Option(name: .customLong("passphrase-fd"), help: .private)
    var passphraseFD: Int32?

    /// A mount flag from mount(8)'s `-o` (see MountHelperArguments), for the kernel to enforce.
    @Option(name: .customLong("kernel-option"), help: .private)
    var kernelOptions: [String] = []

    @Argument(help: "An empty directory.")
    var mountpoint: String

    func validate() throws {
        if let idleLock, LockTriggers.parseDuration(idleLock) == nil {
            throw ValidationError("--idle-lock takes a duration such as 30s, 15m or 1h")
        }
        if LockTriggers.parseDuration(confirmRemember) == nil {
            throw ValidationError("--confirm-remember takes a duration such as 30s, 5m or 1h")
        }
        if let confirmWith, confirmWith.allSatisfy(\.isWhitespace) {
            throw ValidationError("--confirm-with needs a command")
        }
        if let syncWindowMilliseconds, syncWindowMilliseconds <= 0 { throw ValidationError("--sync-window-ms takes a number above 0") }
        guard (0...1_000_000).contains(busyPollMicroseconds) else { throw ValidationError("--busy-poll-us takes a number from 0 to 1000000") }
        if Self.seconds(remountWait) == nil { throw ValidationError("--remount-wait takes 0 or a duration such as 10s or 1m") }
        if replace && !secretService { throw ValidationError("--replace goes with --secret-service") }
        guard logDays >= 0, logEntries >= 0 else { throw ValidationError("--log-days and --log-entries take a number, 0 or more") }
        if let unknown = kernelOptions.first(where: { !MountHelperArguments.kernelOptions.contains($0) }) {
            throw ValidationError("--kernel-option takes \(MountHelperArguments.kernelOptions.sorted().joined(separator: " or ")), not \(unknown)")
        }
    }

    func run() throws {
        var vault = vault
        // Under systemd with LoadCredential=passphrase:FILE, nothing else needs saying.
        if vault.secret.passphraseFile == nil, vault.secret.passphraseCommand == nil, passphraseFD == nil,
           let credential = ServiceManager.passphraseCredential() {
            vault.secret.passphraseFile = credential
        }
        var request = MountRequest(vault: vault, mountpoint: mountpoint, kdf: kdf,
                                   idleLockSeconds: idleLock.flatMap(LockTriggers.parseDuration),
                                   confirmCommand: confirmWith,
                                   confirmRememberSeconds: LockTriggers.parseDuration(confirmRemember) ?? 300,
                                   confirmTimeoutSeconds: confirmTimeout ?? 30,
                                   accessLog: AccessLogBounds(days: logDays, entries: logEntries),
                                   secretService: secretService, replaceSecretService: replace,
                                   lockOnScreenLock: lockOnScreenLock)
        request.kernelOptions = kernelOptions
        request.syncEveryChange = syncEveryChange
        request.syncWindowMilliseconds = syncWindowMilliseconds
        request.busyPollMicroseconds = busyPollMicroseconds
        request.remountWaitSeconds = Self.seconds(remountWait) ?? MountRequest.defaultRemountWaitSeconds
        request.quiet = quiet
        if foreground || readyFD != nil {
            MountDaemon.serve(request, passphraseFD: passphraseFD, readyFD: readyFD)
        }
        try reportingFailures { () throws(CommandFailure) in try BackgroundLaunch.launch(request) }
    }

    /// A duration, or 0 for none.
    static func seconds(_ text: String) -> Int? {
        text == "0" || text == "0s" ? 0 : LockTriggers.parseDuration(text)
    }
}
