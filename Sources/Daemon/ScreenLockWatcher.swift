import DBus
import FUSEDriver
import Glibc
import Support
import VaultCore

/// `--lock-on-screen-lock`: follows logind on the system bus and locks the mount when the
/// session locks (its `Lock` signal, or `LockedHint` turning true) or the machine is about to
/// sleep (`PrepareForSleep(true)`), as a phone's keychain locks with its screen.
///
/// Runs on a helper thread of its own, with a connection of its own. A system bus or logind
/// that cannot be reached costs one log line; the mount goes on without it.
package enum ScreenLockWatcher {
    static let logind = "org.freedesktop.login1"
    static let managerPath = "/org/freedesktop/login1"
    static let managerInterface = "org.freedesktop.login1.Manager"
    static let sessionInterface = "org.freedesktop.login1.Session"

    /// Why logind made the mount lock.
    package enum Cause: Sendable {
        case sessionLocked
        case lockedHint
        case sleep
    }

    static func start(_ fileSystem: FileSystem) {
        HelperThread.start {
            do throws(BusError) {
                let connection = try BusConnection.system()
                // Only the loop thread touches it; signals are matched by any session's path
                // first, so that every match is in place before logind is asked which session
                // is ours (the reply arrives before any signal sent after it).
                let session = SessionPath()
                try watch(connection, session: session) { cause in
                    fileSystem.lock()
                    DaemonLog.lockedByLogind(cause)
                }
                session.path = try ownSession(connection)
                if session.path == nil { DaemonLog.logindSessionUnknown() }
                let ended = connection.run(tickInterval: .seconds(3600)) {}
                DaemonLog.logindUnreachable("the system bus connection ended (\(ended))")
            } catch {
                DaemonLog.logindUnreachable(error.message)
            }
        }
    }

    private final class SessionPath: @unchecked Sendable {
        var path: String?
    }

    private static func watch(_ connection: BusConnection, session: SessionPath,
                              lock: @escaping (Cause) -> Void) throws(BusError) {
        try connection.onSignal(sender: logind, path: nil, interface: sessionInterface, member: "Lock") { path, _ in
            if path == session.path { lock(.sessionLocked) }
        }
        try connection.onSignal(sender: logind, path: nil, interface: "org.freedesktop.DBus.Properties",
                                member: "PropertiesChanged") { (path, body) throws(BusError) in
            guard path == session.path, try body.string() == sessionInterface else { return }
            if try lockedHint(in: &body) == true { lock(.lockedHint) }
        }
        try connection.onSignal(sender: logind, path: managerPath, interface: managerInterface,
                                member: "PrepareForSleep") { (_, body) throws(BusError) in
            if try body.bool() { lock(.sleep) }
        }
    }

    /// `LockedHint` among the changed properties (a{sv}), nil when it is not one of them.
    private static func lockedHint(in body: inout BusReader) throws(BusError) -> Bool? {
        try body.enter("a", "{sv}")
        while !body.atEnd {
            try body.enter("e", "sv")
            if try body.string() == "LockedHint" {
                try body.enter("v", "b")
                return try body.bool()
            }
            try body.skip("v")
            try body.exit()
        }
        return nil
    }

    /// The object path of our logind session: the session of this process, else the one
    /// named by XDG_SESSION_ID (a daemon started by `systemd --user` belongs to no session).
    private static func ownSession(_ connection: BusConnection) throws(BusError) -> String? {
        do throws(BusError) {
            var reply = try connection.call(destination: logind, path: managerPath, interface: managerInterface,
                                            member: "GetSessionByPID") { (writer) throws(BusError) in
                try writer.uint32(UInt32(getpid()))
            }
            return try reply.objectPath()
        } catch let error where error.name == "org.freedesktop.login1.NoSessionForPID" {
            guard let id = getenv("XDG_SESSION_ID").map({ String(cString: $0) }), !id.isEmpty else { return nil }
            var reply = try connection.call(destination: logind, path: managerPath, interface: managerInterface,
                                            member: "GetSession") { (writer) throws(BusError) in
                try writer.string(id)
            }
            return try reply.objectPath()
        }
    }
}
