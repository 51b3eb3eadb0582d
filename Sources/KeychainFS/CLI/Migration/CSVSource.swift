import Support
import VaultCore

/// A CSV export as a migration reads it: the header checked and every record's length too
/// before anything is stored, rows grouped by the dictionary they go to, each item made from
/// its row (see `CSVFormat`) when it is asked for.
final class CSVSource: IncomingSource {
    let dictionaries: [IncomingDictionary]
    private let csv: CSVText
    private let columns: [CSVFormat.Role: Int]
    /// Per dictionary, its items: a record's number, and whether it is that record's TOTP item.
    private let items: [[(record: Int, totp: Bool)]]

    init(_ csv: CSVText, format: CSVFormat, below base: VaultPath, file: String) throws(VaultError) {
        self.csv = csv
        let records = csv.records
        guard let header = records.first else { throw .invalidArgument("\(file): empty; a \(format.rawValue) export starts with its header") }
        let names = header.map { csv.text($0).lowercased() }
        var columns: [CSVFormat.Role: Int] = [:]
        for (role, name) in format.columns {
            if let found = names.firstIndex(of: name) { columns[role] = found }
        }
        let missing = format.required.filter { columns[$0] == nil }.map { format.columns[$0]! }.sorted()
        guard missing.isEmpty else {
            throw .invalidArgument("\(file): no column \(missing.joined(separator: ", ")): not a \(format.rawValue) CSV export")
        }
        self.columns = columns
        var order: [VaultPath] = []
        var grouped: [VaultPath: [(record: Int, totp: Bool)]] = [:]
        for number in records.indices.dropFirst() {
            let record = records[number]
            guard record.count == header.count else {
                throw .invalidArgument("\(file): record \(number) has \(record.count) fields, the header \(header.count)")
            }
            let group = columns[.group].flatMap { record[$0].isEmpty ? nil : record[$0] }
            let path = try format.dictionary(of: group, in: csv, below: base)
            if grouped[path] == nil { order.append(path) }
            grouped[path, default: []].append((number, false))
            if let totp = columns[.totp], !record[totp].isEmpty { grouped[path, default: []].append((number, true)) }
        }
        dictionaries = order.map { IncomingDictionary(path: $0, label: nil, count: grouped[$0]!.count) }
        items = order.map { grouped[$0]! }
    }

    /// The row's title is the label (its URL when it has none); the password the secret (a
    /// Bitwarden secure note's notes); username, URL, notes and Bitwarden's custom fields the
    /// attributes. A TOTP item is labelled "TITLE TOTP" and holds the seed.
    func item(in dictionary: Int, at index: Int, secrets: Bool) throws(CommandFailure) -> IncomingItem {
        let (number, isTOTP) = items[dictionary][index]
        let record = csv.records[number]
        func field(_ role: CSVFormat.Role) -> CSVField? {
            guard let at = columns[role], !record[at].isEmpty else { return nil }
            return record[at]
        }
        return try CommandFailure.vault { () throws(VaultError) -> IncomingItem in
            let isNote = field(.type).map { csv.equals($0, "note") } ?? false
            var attributes: [Attribute] = []
            for (role, name) in [(CSVFormat.Role.username, "username"), (.url, "url"), (.notes, "notes"), (.fields, "fields")] {
                guard let value = field(role), !(role == .notes && isNote) else { continue }
                attributes.append(Attribute(name: try AttributeName(name), value: try csv.copy(value)))
            }
            let title = field(.title) ?? field(.url)
            let label = isTOTP ? try CSVFormat.joined(title, " TOTP", in: csv) : try CSVFormat.copy(title, in: csv)
            guard secrets else { return IncomingItem(label: label, attributes: attributes, content: nil) }
            let secret = isTOTP ? field(.totp) : (isNote ? field(.notes) : field(.password))
            return IncomingItem(label: label, attributes: attributes, content: try CSVFormat.copy(secret, in: csv))
        }
    }
}
