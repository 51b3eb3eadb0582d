import DBus
import VaultCore

/// The properties a client gives CreateItem or CreateCollection (`a{sv}`): a label and, for
/// an item, attributes and a content type, each read into locked memory. A class so that a
/// call waiting for a confirmation can carry them to the loop thread's later work.
final class ItemProperties: @unchecked Sendable {
    var label: SecureBuffer?
    var attributes: [Attribute]?
    var contentType: SecureBuffer?
    /// Attributes one call may give: each value takes locked memory until the call is done
    /// (a confirmation may keep it waiting), and clients use a handful.
    static let attributeLimit = 256

    /// Properties of `interface` (`org.freedesktop.Secret.Item` or `.Collection`) are read;
    /// others are skipped, as the spec lets a service do.
    static func read(_ reader: inout BusReader, interface: String) throws(BusError) -> ItemProperties {
        let properties = ItemProperties()
        try reader.enter("a", "{sv}")
        while !reader.atEnd {
            try reader.enter("e", "sv")
            let key = try reader.string()
            switch key {
            case interface + ".Label":
                try reader.enter("v", "s")
                properties.label = try reader.secretString()
                try reader.exit()
            case interface + ".Attributes" where interface == SecretService.itemInterface:
                try reader.enter("v", "a{ss}")
                properties.attributes = try readAttributes(&reader)
                try reader.exit()
            case interface + ".Type" where interface == SecretService.itemInterface:
                try reader.enter("v", "s")
                properties.contentType = try reader.secretString()
                try reader.exit()
            default:
                try reader.skip("v")
            }
            try reader.exit()
        }
        try reader.exit()
        try properties.checkSizes()
        return properties
    }

    /// `a{ss}` into attributes: names as vault attribute names (refused if empty or too long),
    /// values in locked memory; a name given twice is refused.
    static func readAttributes(_ reader: inout BusReader) throws(BusError) -> [Attribute] {
        var attributes: [Attribute] = []
        var names: Set<AttributeName> = []
        try reader.enter("a", "{ss}")
        while !reader.atEnd {
            guard attributes.count < ItemProperties.attributeLimit else {
                throw .limitsExceeded("at most \(ItemProperties.attributeLimit) attributes")
            }
            try reader.enter("e", "ss")
            let rawName = try reader.secretString()
            let value = try reader.secretString()
            try reader.exit()
            let name: AttributeName
            do throws(VaultError) {
                name = try rawName.withUnsafeBytes { (bytes) throws(VaultError) in try AttributeName(bytes: bytes) }
            } catch {
                throw .invalidArgs("attribute \(attributes.count + 1): \(error)")
            }
            guard value.count <= Vault.maximumAttributeValueBytes else {
                throw .limitsExceeded("attribute values are at most \(Vault.maximumAttributeValueBytes) bytes")
            }
            guard names.insert(name).inserted else { throw .invalidArgs("an attribute is given twice") }
            attributes.append(Attribute(name: name, value: value))
        }
        try reader.exit()
        return attributes
    }

    private func checkSizes() throws(BusError) {
        for value in [label?.count ?? 0, contentType?.count ?? 0] where value > Vault.maximumAttributeValueBytes {
            throw .limitsExceeded("a label or content type is at most \(Vault.maximumAttributeValueBytes) bytes")
        }
    }
}
