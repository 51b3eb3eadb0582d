/// One D-Bus interface of an object: everything a client can call, read, write or hear on it.
package struct BusInterface<Object>: Sendable {
    let name: String
    let methods: [BusMethod<Object>]
    let properties: [BusProperty<Object>]
    let signals: [BusSignal]

    package init(_ name: String, methods: [BusMethod<Object>] = [], properties: [BusProperty<Object>] = [], signals: [BusSignal] = []) {
        self.name = name
        self.methods = methods
        self.properties = properties
        self.signals = signals
    }
}
