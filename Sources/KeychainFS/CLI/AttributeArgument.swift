import VaultCore

/// `NAME=VALUE` as the command line takes it: split at the first `=` (so a name given here
/// cannot contain one), the value being the rest of the argument's UTF-8 text.
enum AttributeArgument {
    static func parse(_ text: String) throws(VaultError) -> Attribute {
        let bytes = Array(text.utf8)
        guard let equals = bytes.firstIndex(of: UInt8(ascii: "=")) else {
            throw .invalidArgument("\"\(text)\": expected NAME=VALUE")
        }
        let name = try AttributeName(bytes: bytes[..<equals])
        let valueBytes = bytes[(equals + 1)...]
        var value = try SecureBuffer(capacity: valueBytes.count)
        valueBytes.withUnsafeBytes { raw in try! value.append(raw) }  // fits: the capacity is its count
        return Attribute(name: name, value: value)
    }

    static func parse(_ texts: [String]) throws(VaultError) -> [Attribute] {
        var attributes: [Attribute] = []
        for text in texts { attributes.append(try parse(text)) }
        return attributes
    }
}
