/// Named, typed arguments of a method or signal, in order; the names are for introspection only.
package typealias BusArguments = [(name: String, type: String)]

/// One method of a D-Bus interface: what it takes and gives (names for introspection, types
/// for the signature check), and the handler that answers it once the signature matched.
package struct BusMethod<Object>: Sendable {
    package typealias Handler = @Sendable (Object, BusCall) throws(BusError) -> Void

    let name: String
    let inputs: BusArguments
    let outputs: BusArguments
    let handler: Handler

    package init(_ name: String, in inputs: BusArguments = [], out outputs: BusArguments = [], _ handler: @escaping Handler) {
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.handler = handler
    }

    /// The body signature a call must carry ("" for none).
    var inSignature: String { inputs.map(\.type).joined() }
}
