/// The client side of org.freedesktop.DBus.Properties.
extension BusConnection {
    /// Before run(), or on the loop thread: a reader inside the variant of `interface`'s
    /// property `name` on `path`, whose value must have the D-Bus signature `signature`.
    package func property(destination: String, path: String, interface: String, name: String,
                          signature: String) throws(BusError) -> BusReader {
        var reply = try call(destination: destination, path: path, interface: "org.freedesktop.DBus.Properties",
                             member: "Get") { (writer: inout BusWriter) throws(BusError) in
            try writer.string(interface)
            try writer.string(name)
        }
        try reply.enter("v", signature)
        return reply
    }
}
