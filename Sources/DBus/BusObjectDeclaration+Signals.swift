/// Signals are sent by the name the declaration gives them, from the interface that declares
/// them: one that is not declared (a misspelling, one introspection does not show) is a
/// programming error, caught by any debug build that sends it.
extension BusObjectDeclaration {
    /// Loop thread only. Sends the declared signal `name` from `path`.
    package func emit(_ name: String, from path: String, on bus: BusConnection,
              _ body: (inout BusWriter) throws(BusError) -> Void) throws(BusError) {
        let declaring = ([propertiesInterface] + interfaces).first { $0.signals.contains { $0.name == name } }
        guard let declaring else {
            assertionFailure("the signal \(name) is not declared for \(called)")
            return
        }
        try bus.emitSignal(path: path, interface: declaring.name, member: name, body)
    }
}
