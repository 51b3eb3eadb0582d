import VaultCore

/// One item a migration brings from another keychain or an export, before it has a name here:
/// the label its name is made from, its attributes, secret and content type, in locked memory.
final class IncomingItem {
    let label: SecureBuffer
    let attributes: [Attribute]
    /// nil in a dry run, which never reads secrets.
    let content: SecureBuffer?
    let contentType: SecureBuffer?

    init(label: consuming SecureBuffer, attributes: [Attribute], content: consuming SecureBuffer?,
         contentType: consuming SecureBuffer? = nil) {
        self.label = label
        self.attributes = attributes
        self.content = content
        self.contentType = contentType
    }
}
