/// When an item's content can be read, as the Apple keychain's accessibility classes say; each
/// class has a content key of its own, so a lock can keep one class's key and wipe another's.
public enum AccessibilityClass: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    /// Only while the vault is unlocked (the default, and what every item of an older format is).
    case whenUnlocked = 0
    /// Also while a mount is locked, until it is unmounted: for services behind a locked screen.
    case afterFirstUnlock = 1
    /// Only with this machine's host key: a copy of the vault elsewhere cannot read it.
    case thisDeviceOnly = 2

    /// The name the command line and JSON use.
    public var description: String {
        switch self {
        case .whenUnlocked: "when-unlocked"
        case .afterFirstUnlock: "after-first-unlock"
        case .thisDeviceOnly: "this-device-only"
        }
    }

    public init(name: String) throws(VaultError) {
        guard let found = AccessibilityClass.allCases.first(where: { $0.description == name }) else {
            throw .invalidArgument("unknown accessibility class \"\(name)\" (expected one of: "
                + AccessibilityClass.allCases.map(\.description).joined(separator: ", ") + ")")
        }
        self = found
    }
}
