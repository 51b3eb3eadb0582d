import DBus
import VaultCore

/// The Secret Service's own errors, and the one table mapping a VaultError to a D-Bus error:
/// nothing else in the service decides which error a client sees.
extension BusError {
    static func isLocked(_ message: String) -> BusError {
        BusError(name: "org.freedesktop.Secret.Error.IsLocked", message: message)
    }

    static func noSession(_ message: String) -> BusError {
        BusError(name: "org.freedesktop.Secret.Error.NoSession", message: message)
    }

    static func noSuchObject(_ path: String) -> BusError {
        BusError(name: "org.freedesktop.Secret.Error.NoSuchObject", message: "no such object: \(path)")
    }

    /// The same error, its message the object's path and the reason's kind only: for an
    /// error of a by-path operation, whose VaultCore message names the path.
    func naming(_ path: String) -> BusError {
        BusError(name: name, message: "\(path): the vault refused the change (\(name.split(separator: ".").last ?? ""))")
    }

    /// Messages name nodes by number (VaultCore's by-node API) and never a name or a value.
    init(_ error: VaultError) {
        switch error {
        case .locked:
            self = .isLocked("the vault is locked")
        case .notFound(let what):
            self = .noSuchObject(what)
        case .accessDenied(let denial):
            self = .accessDenied("refused by an access rule: \(denial)")
        case .itemTooLarge, .attributeTooLarge, .attributesFull:
            self = .limitsExceeded(error.description)
        case .invalidName, .nameTooLong, .invalidArgument, .attributeNameTooLong, .invalidMove,
             .alreadyExists, .attributeExists, .noSuchAttribute, .notEmpty, .notADictionary, .isADictionary:
            self = .invalidArgs(error.description)
        default:
            self = .failed(error.description)
        }
    }
}
