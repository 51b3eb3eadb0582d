/// org.freedesktop.DBus.Properties of an object, answered from its declared properties. A
/// property read the caller may not make (its `read` throws) is an error for Get and is left
/// out of GetAll.
extension BusObjectDeclaration {
    var propertiesInterface: BusInterface<Object> {
        BusInterface(BusStandardInterface.properties, methods: [
            BusMethod("Get", in: [("interface", "s"), ("name", "s")], out: [("value", "v")]) { (object, call) throws(BusError) in
                var reader = call.arguments()
                let property = try lookup(interface: try reader.string(), name: try reader.string(), call)
                let value = try property.read(object)
                call.reply { (writer) throws(BusError) in
                    try writer.open("v", property.signature)
                    try value(&writer)
                    try writer.close()
                }
            },
            BusMethod("GetAll", in: [("interface", "s")], out: [("properties", "a{sv}")]) { (object, call) throws(BusError) in
                var reader = call.arguments()
                let interface = try reader.string()
                // Another interface's properties, or one the object does not have: none.
                let readable = named(interface).flatMap(\.properties).compactMap { property in
                    (try? property.read(object)).map { (property, $0) }
                }
                call.reply { (writer) throws(BusError) in
                    try writer.open("a", "{sv}")
                    for (property, value) in readable {
                        try writer.open("e", "sv")
                        try writer.string(property.name)
                        try writer.open("v", property.signature)
                        try value(&writer)
                        try writer.close()
                        try writer.close()
                    }
                    try writer.close()
                }
            },
            BusMethod("Set", in: [("interface", "s"), ("name", "s"), ("value", "v")]) { (object, call) throws(BusError) in
                var reader = call.arguments()
                let property = try lookup(interface: try reader.string(), name: try reader.string(), call)
                guard let write = property.write else { throw .propertyReadOnly("\(property.name) cannot be set") }
                try reader.enter("v", property.signature)
                let update = try write(object, &reader)
                try reader.exit()
                try update(call)
            },
        ], signals: [BusSignal("PropertiesChanged", [("", "s"), ("", "a{sv}"), ("", "as")])])
    }

    /// The object's own interfaces called `name`; all of them for "" (a caller may leave it out).
    private func named(_ name: String) -> [BusInterface<Object>] {
        name.isEmpty ? interfaces : interfaces.filter { $0.name == name }
    }

    private func lookup(interface: String, name: String, _ call: BusCall) throws(BusError) -> BusProperty<Object> {
        guard let property = named(interface).lazy.flatMap(\.properties).first(where: { $0.name == name }) else {
            throw .unknownProperty("no property \(interface).\(name) on \(call.path)")
        }
        return property
    }
}
