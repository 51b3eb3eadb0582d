import VaultCore

/// One item a migration brings from another keychain or an export, before it has a name here:
/// the label its name is made from, its attributes, secret and content type, in locked memory.
/// The plan takes the buffers over rather than copying them: each takes a page of the
/// locked-memory limit, and a copy would double what a large import needs.
final class IncomingItem {
    let label: SecureBuffer
    let attributes: [Attribute]
    /// nil in a dry run, which never reads secrets; nil too once taken.
    var content: SecureBuffer?
    var contentType: SecureBuffer?

    init(label: consuming SecureBuffer, attributes: [Attribute], content: consuming SecureBuffer?,
         contentType: consuming SecureBuffer? = nil) {
        self.label = label
        self.attributes = attributes
        self.content = content
        self.contentType = contentType
    }
}
