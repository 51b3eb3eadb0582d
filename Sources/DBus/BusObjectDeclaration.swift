/// One kind of D-Bus object, declared once: its own interfaces (methods, properties,
/// signals). Dispatch, the signature check, org.freedesktop.DBus.Properties and
/// org.freedesktop.DBus.Introspectable all come from this one declaration, so what an
/// object says it has is what it answers.
///
/// `Object` is what a handler works on: made by the caller of `dispatch` from the path (a
/// `resolve` that may find nothing there).
package struct BusObjectDeclaration<Object>: Sendable {
    package typealias Admit = @Sendable (Object, BusCall) throws(BusError) -> Void

    /// How error messages call this kind of object ("a collection").
    let called: String
    let interfaces: [BusInterface<Object>]
    /// Who may call the object's own methods (not Properties or Introspect), judged before
    /// the method is looked up.
    let admit: Admit?

    package init(called: String, interfaces: [BusInterface<Object>], admit: Admit? = nil) {
        self.called = called
        self.interfaces = interfaces
        self.admit = admit
    }

    /// An object with no interface of its own, only children (for tools that walk the tree).
    package static var container: BusObjectDeclaration { BusObjectDeclaration(called: "a container", interfaces: []) }

    /// Answers one call to an object of this kind, or throws the error to reply with. Checked
    /// in this order: the interface, the object (`resolve`), `admit`, the member, the
    /// signature; only then is anything read. Introspection needs no object: it describes
    /// the kind, with `children` the nodes below this path.
    package func dispatch(_ call: BusCall, children: () -> [String], resolve: () throws(BusError) -> Object) throws(BusError) {
        let method: BusMethod<Object>
        let object: Object
        switch call.interface {
        case BusStandardInterface.introspectable:
            // Introspect with arguments is answered UnknownMethod, as this layer always has
            // (no client sends any; sd-bus would say InvalidArgs).
            guard call.member == "Introspect", call.signature.isEmpty else { throw .unknownMethod("\(call.interface).\(call.member)") }
            let xml = introspectionXML(children: children())
            return call.reply { (writer) throws(BusError) in try writer.string(xml) }
        case BusStandardInterface.properties:
            object = try resolve()
            let standard = propertiesInterface
            guard let found = standard.methods.first(where: { $0.name == call.member }) else {
                throw .unknownMethod("no method \(call.member) on \(standard.name)")
            }
            method = found
        default:
            guard !interfaces.isEmpty else { throw .unknownMethod("\(call.path) only holds other objects") }
            // D-Bus lets a caller leave the interface out: then any of the object's own.
            let candidates = call.interface.isEmpty ? interfaces : interfaces.filter { $0.name == call.interface }
            guard !candidates.isEmpty else { throw .unknownMethod("no method \(call.interface).\(call.member) on \(call.path)") }
            object = try resolve()
            try admit?(object, call)
            guard let found = candidates.lazy.flatMap(\.methods).first(where: { $0.name == call.member }) else {
                throw .unknownMethod("no method \(call.member) on \(called)")
            }
            method = found
        }
        guard call.signature == method.inSignature else {
            throw .invalidArgs("\(call.member) takes (\(method.inSignature)), not (\(call.signature))")
        }
        try method.handler(object, call)
    }
}
