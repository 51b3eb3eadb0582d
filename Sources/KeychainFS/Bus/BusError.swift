/// A D-Bus error reply: name and message. Also what the bus layer throws when it fails
/// itself (`connection`, `nameTaken`); those two names never travel on the bus.
struct BusError: Error, Equatable, Sendable {
    let name: String
    let message: String

    /// The bus daemon drops a connection that sends a malformed error name, so only these
    /// constructors and well-formed names of the caller's own should build one.
    init(name: String, message: String) {
        self.name = name
        self.message = message
    }

    static let connectionName = "org.keychainfs.Error.Connection"
    static let nameTakenName = "org.keychainfs.Error.NameTaken"

    static func invalidArgs(_ message: String) -> BusError {
        BusError(name: "org.freedesktop.DBus.Error.InvalidArgs", message: message)
    }

    static func unknownMethod(_ message: String) -> BusError {
        BusError(name: "org.freedesktop.DBus.Error.UnknownMethod", message: message)
    }

    static func unknownObject(_ path: String) -> BusError {
        BusError(name: "org.freedesktop.DBus.Error.UnknownObject", message: "no object at \(path)")
    }

    static func unknownProperty(_ message: String) -> BusError {
        BusError(name: "org.freedesktop.DBus.Error.UnknownProperty", message: message)
    }

    static func propertyReadOnly(_ message: String) -> BusError {
        BusError(name: "org.freedesktop.DBus.Error.PropertyReadOnly", message: message)
    }

    static func accessDenied(_ message: String) -> BusError {
        BusError(name: "org.freedesktop.DBus.Error.AccessDenied", message: message)
    }

    static func failed(_ message: String) -> BusError {
        BusError(name: "org.freedesktop.DBus.Error.Failed", message: message)
    }

    static func notSupported(_ message: String) -> BusError {
        BusError(name: "org.freedesktop.DBus.Error.NotSupported", message: message)
    }

    static func limitsExceeded(_ message: String) -> BusError {
        BusError(name: "org.freedesktop.DBus.Error.LimitsExceeded", message: message)
    }

    /// Failure of the layer itself (connect, name request); `message` is one clear CLI line.
    static func connection(_ message: String) -> BusError {
        BusError(name: connectionName, message: message)
    }

    /// A well-known name owned by another connection that we did not (or could not) take.
    static func nameTaken(_ message: String) -> BusError {
        BusError(name: nameTakenName, message: message)
    }
}
