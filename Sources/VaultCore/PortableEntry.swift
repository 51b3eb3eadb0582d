/// One item or dictionary as an import takes it and an export gives it: its path, and for an
/// item its content; the user attributes, label, content type, class and access rules of
/// either. A class (as `Attribute` is) because its secrets cannot be copied and a batch is an
/// array; every secret is in locked memory and wiped when the last reference goes.
public final class PortableEntry: Sendable {
    public enum Kind: Sendable { case item, dictionary }

    public let path: VaultPath
    public let kind: Kind
    /// An item's exact bytes; nil for a dictionary.
    public let content: SecureBuffer?
    public let attributes: [Attribute]
    public let label: SecureBuffer?
    /// An item's content type (a Secret Service property); nil when not set.
    public let contentType: SecureBuffer?
    /// An item's class (nil: what an item created there gets); a dictionary's default class (nil: none of its own).
    public let accessibility: AccessibilityClass?
    public let rules: [AccessRule]

    public init(item path: VaultPath, content: consuming SecureBuffer, attributes: [Attribute] = [],
                label: consuming SecureBuffer? = nil, contentType: consuming SecureBuffer? = nil,
                accessibility: AccessibilityClass? = nil, rules: [AccessRule] = []) {
        self.path = path
        kind = .item
        self.content = .some(content)
        self.attributes = attributes
        self.label = label
        self.contentType = contentType
        self.accessibility = accessibility
        self.rules = rules
    }

    public init(dictionary path: VaultPath, attributes: [Attribute] = [], label: consuming SecureBuffer? = nil,
                defaultClass: AccessibilityClass? = nil, rules: [AccessRule] = []) {
        self.path = path
        kind = .dictionary
        content = nil
        self.attributes = attributes
        self.label = label
        contentType = nil
        accessibility = defaultClass
        self.rules = rules
    }
}
