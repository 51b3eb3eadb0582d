/// org.freedesktop.DBus.Introspectable: the declaration as XML, for tools that look before
/// they call (busctl, d-feet, gdbus), the standard interfaces first.
extension BusObjectDeclaration {
    func introspectionXML(children: [String]) -> String {
        let introspectable = BusInterface<Object>(BusStandardInterface.introspectable, methods: [
            BusMethod("Introspect", out: [("xml", "s")]) { _, _ in },
        ])
        let described = ([introspectable, propertiesInterface] + interfaces).map(Self.xml).joined()
        return """
            <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
            <node>
            \(described)\(children.map { "<node name=\"\(Self.escaped($0))\"/>\n" }.joined())</node>

            """
    }

    private static func xml(_ interface: BusInterface<Object>) -> String {
        var lines = ["<interface name=\"\(interface.name)\">"]
        for method in interface.methods {
            let arguments = arguments(method.inputs, direction: "in") + arguments(method.outputs, direction: "out")
            lines.append(arguments.isEmpty ? " <method name=\"\(method.name)\"/>" : " <method name=\"\(method.name)\">\(arguments)</method>")
        }
        for property in interface.properties {
            lines.append(" <property name=\"\(property.name)\" type=\"\(property.signature)\" access=\"\(property.access)\"/>")
        }
        for signal in interface.signals {
            let arguments = arguments(signal.arguments, direction: nil)
            lines.append(arguments.isEmpty ? " <signal name=\"\(signal.name)\"/>" : " <signal name=\"\(signal.name)\">\(arguments)</signal>")
        }
        lines.append("</interface>")
        return lines.map { $0 + "\n" }.joined()
    }

    private static func arguments(_ arguments: BusArguments, direction: String?) -> String {
        arguments.map { argument in
            let name = argument.name.isEmpty ? "" : "name=\"\(argument.name)\" "
            let direction = direction.map { " direction=\"\($0)\"" } ?? ""
            return "<arg \(name)type=\"\(escaped(argument.type))\"\(direction)/>"
        }.joined()
    }

    /// Child names come from the vault's alias table: escaped, whatever they hold.
    private static func escaped(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            default: out.append(character)
            }
        }
        return out
    }
}
