import ArgumentParser
import Daemon
import Glibc
import Support

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
            let record = RuntimeState.read(mountpoint: path).flatMap { ProcessTable.isDaemon($0.pid, serving: path, byRecord: true) ? $0 : nil }
            guard MountTable.isKeychainFSMount(path) else {
                throw CommandFailure(message: "\(mountpoint) is not a keychainfs mount", status: .mountFailure)
            }
            let outcome = Subprocess.run("fusermount3", ["-u", path])
            guard outcome.status == 0 else {
                let detail = outcome.errorOutput.split(separator: "\n").last.map(String.init) ?? "status \(outcome.status)"
                throw CommandFailure(message: "cannot unmount \(mountpoint): \(detail)", status: .mountFailure)
            }
            guard let pid = record?.pid ?? ProcessTable.daemon(serving: path) else { return }
            var waited = 0
            while ProcessTable.isRunning(pid) {
                guard waited < timeout * 100 else {
                    throw CommandFailure(message: "unmounted, but daemon \(pid) has not exited after \(timeout) s", status: .failure)
                }
                usleep(10_000)
                waited += 1
            }
        }
    }
}
