/// How a request reached the daemon, which decides how far the kernel vouches for who sent it.
public enum AccessChannel: Hashable, Sendable {
    /// A request through the mount, or a message on the control socket: the kernel names the
    /// process that made that very request.
    case request
    /// A D-Bus call: the bus names only the process that opened the connection, which may since
    /// have exec'd another program while the one that speaks on the connection is someone else.
    /// An executable principal admits such a caller only with `--confirm` (the user sees who
    /// asks); a unit the user cannot enter vouches for every process in it.
    case busConnection
}
