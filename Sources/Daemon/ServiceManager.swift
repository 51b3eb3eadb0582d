import CSystemd
import Glibc
import Support
import SystemCalls
import SystemPackage

/// What the daemon tells systemd and takes from it when it runs as a service: the Type=notify
/// state changes, and the passphrase given as a credential (LoadCredential=).
package enum ServiceManager {
    /// The mount serves requests (the kernel's INIT is answered): `systemctl start` returns now.
    static func notifyReady(status: String) {
        notify("READY=1\nSTATUS=" + status.replacingOccurrences(of: "\n", with: " "))
    }

    /// The mount is gone and the wipe begins: systemd shows the unit as deactivating, not failed.
    static func notifyStopping() {
        notify("STOPPING=1\nSTATUS=unmounted; wiping keys and plaintext")
    }

    /// `$CREDENTIALS_DIRECTORY/passphrase`, when systemd handed the unit that credential.
    package static func passphraseCredential() -> String? {
        guard let directory = getenv("CREDENTIALS_DIRECTORY").map({ String(cString: $0) }), !directory.isEmpty else { return nil }
        let path = directory + "/passphrase"
        return access(path, R_OK) == 0 ? path : nil
    }

    /// Only under a service manager that listens: anything else started us, and the socket's
    /// absence is no error.
    private static func notify(_ state: String) {
        guard getenv("NOTIFY_SOCKET") != nil else { return }
        let sent = sd_notify(0, state)
        if sent < 0 { DaemonLog.notifyFailed(errno: Errno(negatedReturn: sent)) }
    }
}
