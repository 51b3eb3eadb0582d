/// A D-Bus error reply: name and message. Also what the bus layer throws when it fails
/// itself (`connection`, `nameTaken`); those two names never travel on the bus.
package struct BusError: Error, Equatable, Sendable {
    package let name: String
    package let message: String

    package init(name: String, message: String) {
        self.name = name
        self.message = message
    }

    /// Whether `name` may travel as an error name (two or more dot-separated elements of
    /// [A-Za-z_][A-Za-z0-9_]*, at most 255 bytes): the bus daemon disconnects a connection
    /// that sends anything else, which would end the whole service over one reply.
    package var hasValidName: Bool {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= 255 else { return false }
        let elements = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard elements.count >= 2 else { return false }
        return elements.allSatisfy { element in
            guard let first = element.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else { return false }
            return element.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_")
            }
        }
    }

    package static let connectionName = "org.keychainfs.Error.Connection"
    package static let nameTakenName = "org.keychainfs.Error.NameTaken"

    package static func invalidArgs(_ message: String) -> BusError {
        BusError(name: "org.freedesktop.DBus.Error.InvalidArgs", message: message)
    }

    package static func unknownMethod(_ message: String) -> BusError {
        BusError(name: "org.freedesktop.DBus.Error.UnknownMethod", message: message)
    }

    package static func unknownObject(_ path: String) -> BusError {
        BusError(name: "org.freedesktop.DBus.Error.UnknownObject", message: "no object at \(path)")
    }

    package static func unknownProperty(_ message: String) -> BusError {
        BusError(name: "org.freedesktop.DBus.Error.UnknownProperty", message: message)
    }

    package static func propertyReadOnly(_ message: String) -> BusError {
        BusError(name: "org.freedesktop.DBus.Error.PropertyReadOnly", message: message)
    }

    package static func accessDenied(_ message: String) -> BusError {
        BusError(name: "org.freedesktop.DBus.Error.AccessDenied", message: message)
    }

    package static func failed(_ message: String) -> BusError {
        BusError(name: "org.freedesktop.DBus.Error.Failed", message: message)
    }

    package static func notSupported(_ message: String) -> BusError {
        BusError(name: "org.freedesktop.DBus.Error.NotSupported", message: message)
    }

    package static func limitsExceeded(_ message: String) -> BusError {
        BusError(name: "org.freedesktop.DBus.Error.LimitsExceeded", message: message)
    }

    /// Failure of the layer itself (connect, name request); `message` is one clear CLI line.
    package static func connection(_ message: String) -> BusError {
        BusError(name: connectionName, message: message)
    }

    /// A well-known name owned by another connection that we did not (or could not) take.
    package static func nameTaken(_ message: String) -> BusError {
        BusError(name: nameTakenName, message: message)
    }
}
