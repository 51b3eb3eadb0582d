/// The command line's requests to a running daemon (`cmd VERB N` and an N-byte payload; see
/// ControlServer+Commands for each one's fields and the rules that judge it). Rules, classes,
/// members and the passphrase are not among them: changing those proves the owner, which
/// only the passphrase does.
package enum ControlRequest: String, CaseIterable, Sendable {
    /// path → the content's bytes (the whole reply)
    case item
    /// path, details → count, then each: name, kind, size, modified, class, default class [, attributes, label?]
    case list
    /// path → kind, size, modified, class, default class, effective default class (dictionaries)
    case node
    /// path → attributes
    case attributes
    /// path, name → value
    case attribute
    /// path, name, value →
    case setAttribute
    /// path, name →
    case removeAttribute
    /// path → label?
    case label
    /// path, label? →
    case setLabel
    /// attributes, details → count, then each: path [, attributes]
    case find
    /// path, content, attributes →
    case store
    /// path, recursive →
    case remove
    /// source, destination →
    case move
    /// path, intermediates →
    case makeDictionary
    /// path → count, then each: path, count, then each rule: text, exe?, unit?, read-only, confirm, changed, recorded
    case rules
    /// since?, after? → count, then each entry; problems; last sequence?
    case log
    /// excluded classes → frames: u32 length + an archive record each, a 0 length at the end; then u32 skipped
    case export
    /// → the item size limit
    case limits
}
