/// One attribute of an item or dictionary (in the mount, an extended attribute `user.NAME`):
/// its name and its value in locked memory. A class because the value cannot be copied and
/// lists of attributes are arrays; the value is wiped when the last reference goes.
public final class Attribute: Sendable {
    public let name: AttributeName
    public let value: SecureBuffer

    public init(name: AttributeName, value: consuming SecureBuffer) {
        self.name = name
        self.value = value
    }
}

/// How `setAttribute` treats an existing attribute of the same name, as setxattr's flags do.
public enum AttributeSetMode: Sendable {
    /// No flag: set it whether or not it exists.
    case createOrReplace
    /// XATTR_CREATE: fail with `.attributeExists` if it exists.
    case create
    /// XATTR_REPLACE: fail with `.noSuchAttribute` if it does not.
    case replace
}
