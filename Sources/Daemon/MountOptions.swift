import FUSEDriver
import VaultCore

/// Every option of a mount, in the order `--help` lists them.
extension MountOption {
    package static var all: [MountOption] {
        [
            .flag("foreground", short: "f", help: "Stay in the foreground (for systemd).", \.foreground),
            MountOption(name: "kdf", value: .kdf, shownDefault: KDFPreset.moderate.rawValue,
                        help: "Argon2id cost when the vault is created by this mount.") { request, text throws(Refusal) in
                guard let preset = KDFPreset(rawValue: text) else {
                    throw Refusal(takes: "takes " + KDFPreset.allCases.map(\.rawValue).joined(separator: ", "))
                }
                request.kdf = preset
            },
            MountOption(name: "idle-lock", word: "idle_lock", value: .duration(zero: false),
                        help: "Lock after this long without any access (30s, 15m, 1h).") { request, text throws(Refusal) in
                request.idleLockSeconds = try duration(text, zero: false, examples: "30s, 15m or 1h")
            },
            MountOption(name: "confirm-with", value: .text(valueName: "CMD"),
                        help: "Run CMD (sh -c) to ask whether a process may have the access a --confirm rule lets it ask for; exit 0 allows.") {
                request, text throws(Refusal) in
                guard !text.allSatisfy(\.isWhitespace) else { throw Refusal(takes: "needs a command") }
                request.confirmCommand = text
            },
            MountOption(name: "confirm-remember", value: .duration(zero: false), shownDefault: "5m",
                        help: "How long a yes holds for its process and rule (default 5m); a no holds for its executable and rule, at most 30 s.") {
                request, text throws(Refusal) in
                request.confirmRememberSeconds = try duration(text, zero: false, examples: "30s, 5m or 1h")
            },
            // Tests only: how long a confirmation command may take, instead of 30 s.
            MountOption(name: "confirm-timeout", value: .number(0...Int.max), isPublic: false, help: "") { request, text throws(Refusal) in
                request.confirmTimeoutSeconds = try number(text, in: 0...Int.max)
            },
            MountOption(name: "log-days", word: "log_days", value: .number(0...Int.max), shownDefault: "\(AccessLogBounds.defaultDays)",
                        help: "Keep the access log for N days (0: no access log).") { request, text throws(Refusal) in
                request.logDays = try number(text, in: 0...Int.max)
            },
            MountOption(name: "log-entries", word: "log_entries", value: .number(0...Int.max), shownDefault: "\(AccessLogBounds.defaultEntries)",
                        help: "Keep at most N access log entries, the newest (0: no access log).") { request, text throws(Refusal) in
                request.logEntries = try number(text, in: 0...Int.max)
            },
            .flag("secret-service", word: "secret_service",
                  help: "Also serve the desktop's keyring API (org.freedesktop.secrets) on the session bus while mounted.", \.secretService),
            .flag("replace", help: "With --secret-service: take org.freedesktop.secrets over from the process that owns it.", \.replaceSecretService),
            .flag("lock-on-screen-lock", help: "Lock when logind (system bus) locks the session or the machine is about to sleep.",
                  \.lockOnScreenLock),
            // mount(8)'s own word for it; async, the default, is among the words it ignores.
            .flag("sync", word: "sync",
                  help: "Make every change durable before its call returns (mkdir, rmdir, unlink, rename, chmod too; by default within 50 ms or at fsync).",
                  \.syncEveryChange),
            // Tests only: a long flusher window shows a change not yet synced.
            MountOption(name: "sync-window-ms", value: .number(1...Int.max), isPublic: false, help: "") { request, text throws(Refusal) in
                request.syncWindowMilliseconds = try number(text, in: 1...Int.max)
            },
            MountOption(name: "busy-poll-us", word: "busy_poll_us", value: .number(0...1_000_000),
                        shownDefault: "\(FUSESession.defaultBusyPollMicroseconds)",
                        help: "How long the daemon keeps asking for the next request after answering one, before it sleeps (microseconds; 0: sleep at once). Each request then skips a wake-up; the cost is CPU while a program works the mount.") {
                request, text throws(Refusal) in
                request.busyPollMicroseconds = try number(text, in: 0...1_000_000)
            },
            // No shown default: KEYCHAINFS_TRANSPORT may change it (`FUSETransport.defaultChoice`).
            MountOption(name: "transport", word: "transport", value: .choice(FUSETransport.allCases.map(\.rawValue)),
                        help: "How requests travel between the kernel and the daemon: read and write on /dev/fuse (the default), io_uring queues (Linux 6.14 with the fuse module's enable_uring on; refused otherwise), or auto: io_uring when the kernel offers it.") {
                request, text throws(Refusal) in
                guard let transport = FUSETransport(rawValue: text) else {
                    throw Refusal(takes: "takes " + FUSETransport.allCases.map(\.rawValue).joined(separator: ", "))
                }
                request.transport = transport
            },
            MountOption(name: "remount-wait", word: "remount_wait", value: .duration(zero: true),
                        shownDefault: "\(MountRequest.defaultRemountWaitSeconds)s",
                        help: "When the vault's previous daemon, its mount already gone, is still storing and wiping, wait this long for it (default 10s; 0: refuse at once). A vault another mount serves is refused at once.") {
                request, text throws(Refusal) in
                request.remountWaitSeconds = try duration(text, zero: true, examples: "10s or 1m")
            },
            .flag("quiet", short: "q",
                  help: "Print nothing on success (a mount(8) helper's way; the `VAULT MOUNTPOINT -o OPTIONS` form is always quiet).", \.quiet),
            // Mount flags the kernel enforces (`-o ro`, `-o noexec`); mount(8)'s alone.
            MountOption(name: "kernel-option", value: .repeated(choices: kernelFlags), isPublic: false, help: "") {
                request, text throws(Refusal) in
                guard kernelFlags.contains(text) else { throw Refusal(takes: "takes \(kernelFlags.joined(separator: " or ")), not \(text)") }
                request.kernelOptions.append(text)
            },
            MountOption(name: "passphrase-file", word: "passfile", value: .text(valueName: nil), sharedWithEveryCommand: true, help: "") {
                request, text throws(Refusal) in
                request.vault.passphraseFile = text
            },
            MountOption(name: "pin-file", word: "pinfile", value: .text(valueName: nil), sharedWithEveryCommand: true, help: "") {
                request, text throws(Refusal) in
                request.vault.pinFile = text
                request.vault.opensWithPIN = true
            },
            MountOption(name: "accept-rollback", word: "accept_rollback", value: .none, sharedWithEveryCommand: true, help: "") { request, _ in
                request.vault.acceptRollback = true
            },
            MountOption(name: "no-offline", word: "no_offline", value: .none, sharedWithEveryCommand: true, help: "") { request, _ in
                request.vault.noOffline = true
            },
        ]
    }

    /// Mount flags the kernel enforces on the mount itself.
    static let kernelFlags = ["noexec", "ro"]

    /// What no one option can say alone: why the options of `request` do not go together.
    package static func conflict(in request: MountRequest) -> String? {
        request.replaceSecretService && !request.secretService ? "--replace goes with --secret-service" : nil
    }
}
