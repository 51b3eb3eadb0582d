/// One option of a mount, declared once (`MountOption.all`): the command line's `--name`, the
/// word mount(8) passes after `-o`, what value it takes, whether `--help` and the man page show
/// it, its help, and where its value goes in the `MountRequest`. The command's options
/// (CLI/MountOptionArguments), their checks, the `-o` translation and the daemon's request all
/// come from it.
package struct MountOption {
    /// What follows the option on the command line.
    package enum Value {
        /// Nothing: a flag.
        case none
        /// Any text the check accepts.
        case text(valueName: String?)
        /// A whole number in `range`.
        case number(ClosedRange<Int>)
        /// A duration (30s, 15m, 1h), or 0 too when `zero`.
        case duration(zero: Bool)
        /// One of the key derivation presets.
        case kdf
        /// One of `choices`, given any number of times; each is a `-o` word of its own.
        case repeated(choices: [String])
        /// One of `choices`, once (`--name CHOICE`, `-o word=CHOICE`).
        case choice([String])
    }

    /// A value the option does not take: what it takes, to be said after the option's name.
    package struct Refusal: Error, Equatable {
        package let takes: String
    }

    /// The long name, `--name` on the command line.
    package let name: String
    package var short: Character? = nil
    /// The word after mount(8)'s `-o` (`word` or `word=VALUE`); nil: none.
    package var word: String? = nil
    package let value: Value
    /// Shown by `--help`, the man page and the completions; a private option is a test's knob
    /// or what mount(8) alone passes, accepted and never shown.
    package var isPublic = true
    /// Declared by the vault options every command shares (`--passphrase-file`, ...), not here;
    /// the table still gives its `-o` word and where it goes.
    package var sharedWithEveryCommand = false
    /// The value the command line shows as its default; the request's own default is the same.
    package var shownDefault: String? = nil
    package let help: String
    /// Puts a checked value in the request: "" for a flag, the text otherwise.
    package let apply: (inout MountRequest, String) throws(Refusal) -> Void
}

extension MountOption {
    package static func flag(_ name: String, short: Character? = nil, word: String? = nil, help: String,
                     _ field: WritableKeyPath<MountRequest, Bool>) -> MountOption {
        MountOption(name: name, short: short, word: word, value: .none, help: help) { request, _ in request[keyPath: field] = true }
    }

    /// A duration in seconds; the option's 0 (when it takes one) is 0 seconds.
    package static func seconds(_ text: String, zero: Bool) -> Int? {
        zero && (text == "0" || text == "0s") ? 0 : LockTriggers.parseDuration(text)
    }

    /// The number a `.number` option's text means, or why not.
    package static func number(_ text: String, in range: ClosedRange<Int>) throws(Refusal) -> Int {
        guard let number = Int(text), range.contains(number) else {
            throw Refusal(takes: range.upperBound == .max ? "takes a number, \(range.lowerBound == 0 ? "0 or more" : "above \(range.lowerBound - 1)")"
                                                          : "takes a number from \(range.lowerBound) to \(range.upperBound)")
        }
        return number
    }

    package static func duration(_ text: String, zero: Bool, examples: String) throws(Refusal) -> Int {
        guard let seconds = seconds(text, zero: zero) else {
            throw Refusal(takes: zero ? "takes 0 or a duration such as \(examples)" : "takes a duration such as \(examples)")
        }
        return seconds
    }
}
