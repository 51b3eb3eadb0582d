import VaultCore

/// One item of another Secret Service, as `import secret-service` copies it: its object path
/// (not secret: the service numbers or names it), and its label, attributes, and, when read,
/// secret and content type, all in locked memory. A class: its secrets cannot be copied.
package final class SourceItem {
    package let path: String
    package let label: SecureBuffer
    package let attributes: [Attribute]
    /// nil until read (a dry run never reads it); a caller may take them (`take()`) rather
    /// than copy, as each buffer costs a page of the locked-memory limit.
    package var content: SecureBuffer?
    package var contentType: SecureBuffer?

    init(path: String, label: consuming SecureBuffer, attributes: [Attribute],
         content: consuming SecureBuffer?, contentType: consuming SecureBuffer?) {
        self.path = path
        self.label = label
        self.attributes = attributes
        self.content = content
        self.contentType = contentType
    }
}
