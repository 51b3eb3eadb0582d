import VaultCore

/// What an extended attribute's name means to the vault: a user attribute (`user.NAME`, the
/// vault's name without the prefix), or one of a node's properties, shown in a namespace of
/// their own (`keychainfs.label`, `keychainfs.content_type`) so that they are neither search
/// attributes nor listed: `cp -a` or `rsync -X` to a filesystem that cannot hold that
/// namespace has nothing to warn about. Linux hands a FUSE filesystem names of any namespace.
enum ExtendedAttributeName {
    case attribute(AttributeName)
    case property(ItemProperty)

    static let userNamespace = Array("user.".utf8)
    private static let labelName = Array("keychainfs.label".utf8)
    private static let contentTypeName = Array("keychainfs.content_type".utf8)

    /// nil for a name of another namespace (which the vault holds nothing of).
    init?(_ raw: UnsafeRawBufferPointer) throws(VaultError) {
        if raw.starts(with: ExtendedAttributeName.userNamespace) {
            self = .attribute(try AttributeName(bytes: UnsafeRawBufferPointer(rebasing: raw[ExtendedAttributeName.userNamespace.count...])))
        } else if raw.elementsEqual(ExtendedAttributeName.labelName) {
            self = .property(.label)
        } else if raw.elementsEqual(ExtendedAttributeName.contentTypeName) {
            self = .property(.contentType)
        } else {
            return nil
        }
    }
}
