/// What a node has besides its content and its user's attributes: a Secret Service item's
/// label and content type, and, on the vault's root, the Secret Service's aliases (which
/// collection `default` is). Not search attributes: no listing of a node's attributes shows
/// them, and no search matches them.
public enum ItemProperty: Sendable, CaseIterable {
    case label
    case contentType
    case aliases

    /// Each is stored as an attribute under a reserved name (a NUL first, which no user
    /// attribute name can have): sealed, bound to its node and counted against the node's
    /// attribute limit like any attribute, without a record or a key of its own.
    var storedName: AttributeName {
        switch self {
        case .label: ItemProperty.labelName
        case .contentType: ItemProperty.contentTypeName
        case .aliases: ItemProperty.aliasesName
        }
    }

    private static let labelName = AttributeName(reserved: "label")
    private static let contentTypeName = AttributeName(reserved: "content-type")
    private static let aliasesName = AttributeName(reserved: "aliases")
}
