import ArgumentParser
import Glibc
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

    @Option(name: .customLong("ready-fd"), help: .private)
    var readyFD: Int32?

    @Option(name: .customLong("passphrase-fd"), help: .private)
    var passphraseFD: Int32?

    @Argument(help: "An empty directory.")
    var mountpoint: String

    func validate() throws {
        if let idleLock, LockTriggers.parseDuration(idleLock) == nil {
            throw ValidationError("--idle-lock takes a duration such as 30s, 15m or 1h")
        }
    }

    func run() throws {
        let request = MountRequest(vault: vault, mountpoint: mountpoint, kdf: kdf,
                                   idleLockSeconds: idleLock.flatMap(LockTriggers.parseDuration))
        if foreground || readyFD != nil {
            MountDaemon.serve(request, passphraseFD: passphraseFD, readyFD: readyFD)
        }
        try reportingFailures { () throws(CommandFailure) in try BackgroundLaunch.launch(request) }
    }
}

struct Unmount: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Unmount a vault; returns once its daemon has wiped everything and exited."
    )

    @Argument(help: "The mountpoint.")
    var mountpoint: String

    @Option(help: "Seconds to wait for the daemon to exit.")
    var timeout: Int = 30

    func run() throws {
        try reportingFailures { () throws(CommandFailure) in
            let path = Mountpoint.resolved(mountpoint)
            let record = RuntimeState.read(mountpoint: path).flatMap { Subprocess.isDaemon($0.pid, serving: path, byRecord: true) ? $0 : nil }
            guard MountTable.isKeychainFSMount(path) else {
                throw CommandFailure(message: "\(mountpoint) is not a keychainfs mount", status: ExitStatus.mountFailure)
            }
            let outcome = Subprocess.run("fusermount3", ["-u", path])
            guard outcome.status == 0 else {
                let detail = outcome.errorOutput.split(separator: "\n").last.map(String.init) ?? "status \(outcome.status)"
                throw CommandFailure(message: "cannot unmount \(mountpoint): \(detail)", status: ExitStatus.mountFailure)
            }
            guard let pid = record?.pid ?? Subprocess.daemon(serving: path) else { return }
            var waited = 0
            while Subprocess.isRunning(pid) {
                guard waited < timeout * 100 else {
                    throw CommandFailure(message: "unmounted, but daemon \(pid) has not exited after \(timeout) s", status: ExitStatus.failure)
                }
                usleep(10_000)
                waited += 1
            }
        }
    }
}
