/// A slash-separated path from the vault's root, such as `app/token`. Empty components
/// (leading, trailing or doubled slashes) are ignored; the empty path is the root.
public struct VaultPath: Hashable, Sendable, CustomStringConvertible {
    public let components: [ItemName]

    public init(_ string: String) throws(VaultError) {
        var components: [ItemName] = []
        for part in string.utf8.split(separator: 0x2F, omittingEmptySubsequences: true) {
            do throws(VaultError) {
                components.append(try ItemName(bytes: part))
            } catch .invalidName(let reason) {
                // The command line's own input: quoting it helps and leaks nothing new.
                throw .invalidName("\"\(String(decoding: part.prefix(40), as: UTF8.self))\": \(reason)")
            } catch .nameTooLong(let reason) {
                throw .nameTooLong("\"\(String(decoding: part.prefix(40), as: UTF8.self))…\": \(reason)")
            }
        }
        self.components = components
    }

    public init(components: [ItemName]) { self.components = components }

    public static let root = VaultPath(components: [])
    public var isRoot: Bool { components.isEmpty }
    public var parent: VaultPath { VaultPath(components: components.dropLast()) }
    public var lastComponent: ItemName? { components.last }
    public func appending(_ name: ItemName) -> VaultPath { VaultPath(components: components + [name]) }

    public var description: String {
        isRoot ? "/" : components.map(\.description).joined(separator: "/")
    }
}
