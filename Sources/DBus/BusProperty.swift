/// One property of a D-Bus interface. Reading is two steps so that GetAll can leave out what
/// the caller may not read without having begun to write it: `read` decides (and throws),
/// the body it returns writes the value. Writing is two steps too: `write` reads the new
/// value from inside the variant, and the update it returns applies it (and replies) once the
/// variant was read to its end. A property without `write` is read-only.
package struct BusProperty<Object>: Sendable {
    package typealias Value = (inout BusWriter) throws(BusError) -> Void
    package typealias Getter = @Sendable (Object) throws(BusError) -> Value
    package typealias Update = (BusCall) throws(BusError) -> Void
    package typealias Setter = @Sendable (Object, inout BusReader) throws(BusError) -> Update

    let name: String
    let signature: String
    let read: Getter
    let write: Setter?

    package init(_ name: String, _ signature: String, read: @escaping Getter, write: Setter? = nil) {
        self.name = name
        self.signature = signature
        self.read = read
        self.write = write
    }

    var access: String { write == nil ? "read" : "readwrite" }
}
