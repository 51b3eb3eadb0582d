import DBus
import Glibc
import Keyring
import SystemCalls
import SystemPackage
import Support
import VaultCore

/// Who serves `org.freedesktop.secrets` on a bus now, for `secret-service --status`: a desktop
/// switching keyrings must see whether the name went to KeychainFS or stayed with the other one.
package struct SecretServiceOwnership: Sendable {
    /// nil: nobody owns the name.
    package let owner: BusNameOwner?
    /// What `/proc/PID/exe` leads to (not `comm`, which a process sets for itself); nil when
    /// the process is gone or not ours to inspect.
    package let executable: String?
    package let command: String?
    /// The `--vault` the owner was started with, when it is KeychainFS and named one.
    package let vault: String?
    /// Whether the bus daemon would start a program for the name (an activation file).
    package let activatable: Bool

    /// A KeychainFS process: its executable is called keychainfs.
    package var isKeychainFS: Bool {
        guard let executable else { return false }
        let path = executable.hasSuffix(" (deleted)") ? String(executable.dropLast(10)) : executable
        return path.split(separator: "/").last == "keychainfs"
    }

    package static func query(_ bus: BusConnection) throws(BusError) -> SecretServiceOwnership {
        let owner = try bus.owner(ofName: SecretServiceHost.busName)
        let activatable = try bus.activatableNames().contains(SecretServiceHost.busName)
        guard let pid = owner?.pid else {
            return SecretServiceOwnership(owner: owner, executable: nil, command: nil, vault: nil, activatable: activatable)
        }
        let executable = ProcessIdentity(pid: pid).executable?.path
        let command = text(of: "/proc/\(pid)/comm").map { $0.hasSuffix("\n") ? String($0.dropLast()) : $0 }
        var ownership = SecretServiceOwnership(owner: owner, executable: executable, command: command, vault: nil, activatable: activatable)
        if ownership.isKeychainFS {
            let arguments = text(of: "/proc/\(pid)/cmdline")?.split(separator: "\0", omittingEmptySubsequences: false).map(String.init) ?? []
            ownership = SecretServiceOwnership(owner: owner, executable: executable, command: command,
                                               vault: vaultArgument(arguments), activatable: activatable)
        }
        return ownership
    }

    private static func vaultArgument(_ arguments: [String]) -> String? {
        for (index, argument) in arguments.enumerated() {
            if argument.hasPrefix("--vault=") { return String(argument.dropFirst(8)) }
            if argument == "--vault", index + 1 < arguments.count { return arguments[index + 1] }
        }
        return nil
    }

    private static func text(of path: String) -> String? {
        guard let bytes = try? FileDescriptor.contents(of: path) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension SecretServiceOwnership {
    /// On the session bus this process would serve on; no session bus is `serviceUnavailable`,
    /// as for serving.
    package static func onSessionBus() throws(CommandFailure) -> SecretServiceOwnership {
        do throws(BusError) {
            return try query(BusConnection.session())
        } catch {
            throw CommandFailure(message: error.message, status: .serviceUnavailable)
        }
    }
}
