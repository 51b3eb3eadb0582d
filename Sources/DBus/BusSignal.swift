/// One signal of a D-Bus interface, for introspection: its name and arguments (a name may be
/// empty, as in the standard interfaces).
package struct BusSignal: Sendable {
    let name: String
    let arguments: BusArguments

    package init(_ name: String, _ arguments: BusArguments = []) {
        self.name = name
        self.arguments = arguments
    }
}
