import ArgumentParser
import Daemon
import VaultCore

/// The mount command's options, made from `MountOption.all` instead of one property each.
/// ArgumentParser finds a command's options by reflecting an instance (`Mirror`); this type's
/// mirror lists one `Option` or `Flag` per public or private entry of the table, and its decoder
/// reads them back by the same names.
struct MountOptionArguments: ParsableArguments, CustomReflectable {
    /// Each option's text as given (or its shown default); a flag given is "".
    private var given: [(name: String, value: String)] = []

    init() {}

    private static var declared: [MountOption] { MountOption.all.filter { !$0.sharedWithEveryCommand } }

    var customMirror: Mirror {
        Mirror(self, children: Self.declared.map { (label: $0.name, value: Self.definition($0)) })
    }

    private static func definition(_ option: MountOption) -> Any {
        let name: NameSpecification = option.short.map { [.customShort($0), .customLong(option.name)] } ?? [.customLong(option.name)]
        var help = option.isPublic ? ArgumentHelp(option.help) : .private
        switch option.value {
        case .none:
            return Flag(wrappedValue: false, name: name, help: help)
        case .kdf:
            return Option<KDFPreset>(wrappedValue: KDFPreset(rawValue: option.shownDefault ?? "") ?? .moderate, name: name, help: help)
        case .repeated:
            return Option<[String]>(wrappedValue: [], name: name, help: help)
        case .text(let valueName):
            if option.isPublic { help.valueName = valueName }
            fallthrough
        case .number, .duration, .choice:
            if case .choice(let choices) = option.value, option.isPublic { help.valueName = choices.joined(separator: "|") }
            if let shown = option.shownDefault { return Option<String>(wrappedValue: shown, name: name, help: help) }
            return Option<String?>(name: name, help: help)
        }
    }

    private struct Key: CodingKey {
        let stringValue: String
        init(stringValue: String) { self.stringValue = stringValue }
        var intValue: Int? { nil }
        init?(intValue: Int) { nil }
    }

    init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        for option in Self.declared {
            let key = Key(stringValue: option.name)
            switch option.value {
            case .none:
                if try container.decode(Flag<Bool>.self, forKey: key).wrappedValue { given.append((option.name, "")) }
            case .kdf:
                given.append((option.name, try container.decode(Option<KDFPreset>.self, forKey: key).wrappedValue.rawValue))
            case .repeated:
                given += try container.decode(Option<[String]>.self, forKey: key).wrappedValue.map { (option.name, $0) }
            case .text, .number, .duration, .choice:
                if option.shownDefault != nil {
                    given.append((option.name, try container.decode(Option<String>.self, forKey: key).wrappedValue))
                } else if let value = try container.decode(Option<String?>.self, forKey: key).wrappedValue {
                    given.append((option.name, value))
                }
            }
        }
    }

    /// The options' values put in `request`, checked as the table says.
    func apply(to request: inout MountRequest) throws(ValidationError) {
        let table = Dictionary(uniqueKeysWithValues: Self.declared.map { ($0.name, $0) })
        for (name, value) in given {
            do throws(MountOption.Refusal) {
                try table[name]!.apply(&request, value)
            } catch {
                throw ValidationError("--\(name) \(error.takes)")
            }
        }
        if let message = MountOption.conflict(in: request) { throw ValidationError(message) }
    }

    func validate() throws {
        var scratch = MountRequest(vault: .init(location: ""), mountpoint: "")
        try apply(to: &scratch)
    }
}
