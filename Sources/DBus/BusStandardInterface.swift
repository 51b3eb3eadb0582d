/// The interfaces every object answers from its declaration rather than from handlers of its
/// own: Introspectable (the declaration as XML) and Properties (the declared properties).
package enum BusStandardInterface {
    static let introspectable = "org.freedesktop.DBus.Introspectable"
    static let properties = "org.freedesktop.DBus.Properties"

    package static func contains(_ name: String) -> Bool {
        name == introspectable || name == properties
    }
}
