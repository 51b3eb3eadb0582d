import Daemon
import FoundationEssentials
import Glibc
import Support
import VaultCore

/// What `--json` prints, encoded by JSONEncoder with sorted keys. A value that is UTF-8 text is
/// given as a string; any other bytes as base64, and the output says which.
enum JSONOutput {
    static func write(_ value: some Encodable) throws(VaultError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            var data = try encoder.encode(value)
            data.append(0x0A)
            guard data.withUnsafeBytes({ Terminal.writeAll(1, $0) }) else { throw VaultError.storageFailure("cannot write to standard output") }
        } catch let error as VaultError {
            throw error
        } catch {
            throw .invalidArgument("cannot encode the output as JSON: \(error)")
        }
    }

    /// The attributes as a JSON object, name to value.
    static func attributes(_ attributes: [Attribute]) -> [String: AttributeValue] {
        var object: [String: AttributeValue] = [:]
        for attribute in attributes { object[attribute.name.description] = AttributeValue(attribute.value) }
        return object
    }

    /// A label as JSON, nil when there is none.
    static func label(_ value: borrowing SecureBuffer?) -> AttributeValue? {
        switch value {
        case .some(let value): AttributeValue(value)
        case .none: nil
        }
    }

    /// The bytes as text when they are UTF-8.
    static func text(_ value: borrowing SecureBuffer) -> String? {
        value.withUnsafeBytes { String(validating: $0, as: UTF8.self) }
    }

    static func base64(_ value: borrowing SecureBuffer) -> String {
        value.withUnsafeBytes { Data($0).base64EncodedString() }
    }

    /// ISO-8601 in UTC, to the second or (`nanoseconds`) to the nanosecond.
    static func utcTime(_ time: Timestamp, nanoseconds: Bool = false) -> String {
        var seconds = time_t(time.seconds)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var text = [CChar](repeating: 0, count: 32)
        strftime(&text, text.count, "%Y-%m-%dT%H:%M:%S", &parts)
        let whole = text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        guard nanoseconds else { return whole + "Z" }
        let nanos = String(time.nanoseconds)
        return whole + "." + String(repeating: "0", count: 9 - nanos.count) + nanos + "Z"
    }
}

/// An attribute's value: a string, or `{"base64": "..."}` when it is not UTF-8 text.
enum AttributeValue: Encodable {
    case text(String)
    case base64(String)

    init(_ value: borrowing SecureBuffer) {
        if let text = JSONOutput.text(value) { self = .text(text) } else { self = .base64(JSONOutput.base64(value)) }
    }

    private enum CodingKeys: String, CodingKey { case base64 }

    func encode(to encoder: any Encoder) throws {
        switch self {
        case .text(let text):
            var container = encoder.singleValueContainer()
            try container.encode(text)
        case .base64(let encoded):
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(encoded, forKey: .base64)
        }
    }
}

/// `get --json`, `find --json` (without value and encoding) and `attr --json`.
struct ItemJSON: Encodable {
    let path: String
    var value: String?
    /// "utf-8" or "base64", with `value`.
    var encoding: String?
    let attributes: [String: AttributeValue]
    /// The item's accessibility class (`get --json`).
    var `class`: String? = nil
    /// The item's label, when it has one (`get --json`).
    var label: AttributeValue? = nil
}

/// One entry of `ls --json`.
struct EntryJSON: Encodable {
    let name: String
    /// "item" or "dictionary".
    let kind: String
    /// An item's length in bytes; a dictionary's number of entries.
    let size: Int
    let modified: String
    let attributes: [String: AttributeValue]
    /// An item's accessibility class.
    let `class`: String?
    /// A dictionary's default class for items created below it, when it has one.
    let defaultClass: String?
    /// The entry's label, when it has one.
    let label: AttributeValue?

    init(_ entry: EntrySummary, attributes: [String: AttributeValue], label: AttributeValue?) {
        let node = entry.node
        name = entry.name.description
        kind = node.kind == .dictionary ? "dictionary" : "item"
        size = node.size
        modified = JSONOutput.utcTime(node.modified)
        self.attributes = attributes
        `class` = node.kind == .item ? node.accessibility.description : nil
        defaultClass = node.defaultClass?.description
        self.label = label
    }
}
