import Glibc

/// Who holds a well-known name, as the bus daemon tells it (never what the owner claims).
package struct BusNameOwner: Equatable, Sendable {
    package let uniqueName: String
    /// nil when the daemon does not know the owner's process (another machine, a hidden pid).
    package let pid: pid_t?
}

extension BusConnection {
    private static let daemon = "org.freedesktop.DBus"
    private static let daemonPath = "/org/freedesktop/DBus"

    /// Before run(), or on the loop thread: the owner of `name` now, nil when nobody owns it.
    package func owner(ofName name: String) throws(BusError) -> BusNameOwner? {
        let unique: String
        do {
            var reply = try call(destination: BusConnection.daemon, path: BusConnection.daemonPath,
                                 interface: BusConnection.daemon, member: "GetNameOwner") { (writer: inout BusWriter) throws(BusError) in
                try writer.string(name)
            }
            unique = try reply.string()
        } catch where error.name == "org.freedesktop.DBus.Error.NameHasNoOwner" {
            return nil
        }
        // The owner may leave between the two calls: then it has no process to tell.
        let pid: pid_t?
        do {
            var reply = try call(destination: BusConnection.daemon, path: BusConnection.daemonPath,
                                 interface: BusConnection.daemon, member: "GetConnectionUnixProcessID") { (writer: inout BusWriter) throws(BusError) in
                try writer.string(unique)
            }
            pid = pid_t(exactly: try reply.uint32())
        } catch {
            pid = nil
        }
        return BusNameOwner(uniqueName: unique, pid: pid)
    }

    /// Before run(), or on the loop thread: the names the bus daemon would start a program for
    /// (its activation files), whether or not one runs now.
    package func activatableNames() throws(BusError) -> [String] {
        var reply = try call(destination: BusConnection.daemon, path: BusConnection.daemonPath,
                             interface: BusConnection.daemon, member: "ListActivatableNames")
        try reply.enter("a", "s")
        var names: [String] = []
        while try reply.peek() != nil { names.append(try reply.string()) }
        try reply.exit()
        return names
    }
}
