import ArgumentParser
import VaultCore

/// The CSV exports `import csv` reads, and where each column goes. Columns are found by their
/// header's name (case ignored), so that added or reordered columns of a newer version do not
/// matter; a column a format needs that is missing is an error before anything is stored.
///
/// Every format: each row is an item named after its title (its label; the URL, else
/// "item", when the title is empty) holding the password; the username and URL become the
/// attributes `username` and `url` (what `find` and Secret Service clients search), notes the
/// attribute `notes`; a TOTP secret becomes an item of its own, "TITLE TOTP", with the same
/// attributes (a seed is a secret, and attributes are shown to whoever lists items).
/// Groups and folders become dictionaries below the format's one (KeePassXC's root group is
/// that dictionary itself).
enum CSVFormat: String, CaseIterable, ExpressibleByArgument {
    case keepassxc
    case bitwarden
    case onePassword = "1password"
    case chromium

    enum Role: CaseIterable { case group, title, username, password, url, notes, totp, type, fields }

    /// Where the items go unless --into says otherwise.
    var defaultDictionary: String {
        switch self {
        case .keepassxc: "KeePassXC"
        case .bitwarden: "Bitwarden"
        case .onePassword: "1Password"
        case .chromium: "Chromium"
        }
    }

    /// KeePassXC: "Group","Title","Username","Password","URL","Notes","TOTP","Icon","Last Modified","Created".
    /// Bitwarden: folder,favorite,type,name,notes,fields,reprompt,login_uri,login_username,login_password,login_totp.
    /// 1Password 8: Title,Url,Username,Password,OTPAuth,Favorite,Archived,Tags,Notes.
    /// Chromium (and Chrome, Edge, Brave): name,url,username,password,note.
    private var columns: [Role: String] {
        switch self {
        case .keepassxc:
            [.group: "group", .title: "title", .username: "username", .password: "password", .url: "url", .notes: "notes", .totp: "totp"]
        case .bitwarden:
            [.group: "folder", .title: "name", .username: "login_username", .password: "login_password", .url: "login_uri",
             .notes: "notes", .totp: "login_totp", .type: "type", .fields: "fields"]
        case .onePassword:
            [.title: "title", .username: "username", .password: "password", .url: "url", .notes: "notes", .totp: "otpauth"]
        case .chromium:
            [.title: "name", .username: "username", .password: "password", .url: "url", .notes: "note"]
        }
    }

    private var required: Set<Role> { [.title, .password] }

    /// The rows of an export (its header first) as dictionaries of items below `base`.
    func dictionaries(_ csv: CSVText, below base: VaultPath, file: String, readingSecrets: Bool) throws(VaultError) -> [IncomingDictionary] {
        let records = csv.records
        guard let header = records.first else { throw .invalidArgument("\(file): empty; a \(rawValue) export starts with its header") }
        let names = header.map { csv.text($0).lowercased() }
        var index: [Role: Int] = [:]
        for (role, name) in columns {
            if let found = names.firstIndex(of: name) { index[role] = found }
        }
        let missing = required.filter { index[$0] == nil }.map { columns[$0]! }.sorted()
        guard missing.isEmpty else {
            throw .invalidArgument("\(file): no column \(missing.joined(separator: ", ")): not a \(rawValue) CSV export")
        }
        var order: [VaultPath] = []
        var items: [VaultPath: [IncomingItem]] = [:]
        for (number, record) in records.dropFirst().enumerated() {
            guard record.count == header.count else {
                throw .invalidArgument("\(file): record \(number + 1) has \(record.count) fields, the header \(header.count)")
            }
            func field(_ role: Role) -> CSVField? {
                guard let at = index[role], !record[at].isEmpty else { return nil }
                return record[at]
            }
            let path = try dictionary(of: field(.group), in: csv, below: base)
            if items[path] == nil { order.append(path) }
            let isNote = field(.type).map { csv.equals($0, "note") } ?? false
            var attributes: [Attribute] = []
            if let username = field(.username) { attributes.append(Attribute(name: try AttributeName("username"), value: try csv.copy(username))) }
            if let url = field(.url) { attributes.append(Attribute(name: try AttributeName("url"), value: try csv.copy(url))) }
            if !isNote, let notes = field(.notes) { attributes.append(Attribute(name: try AttributeName("notes"), value: try csv.copy(notes))) }
            if let fields = field(.fields) { attributes.append(Attribute(name: try AttributeName("fields"), value: try csv.copy(fields))) }
            let title = field(.title) ?? field(.url)
            let label = try Self.copy(title, in: csv)
            let secret = isNote ? field(.notes) : field(.password)
            let content: SecureBuffer?
            if readingSecrets { content = try Self.copy(secret, in: csv) } else { content = nil }
            var found = [IncomingItem(label: label, attributes: attributes, content: content)]
            if let totp = field(.totp) {
                let totpLabel = try Self.joined(title, " TOTP", in: csv)
                found.append(IncomingItem(label: totpLabel, attributes: attributes,
                                          content: readingSecrets ? try csv.copy(totp) : nil))
            }
            items[path, default: []].append(contentsOf: found)
        }
        if order.isEmpty { order.append(base) }
        return order.map { IncomingDictionary(path: $0, label: nil, items: items[$0] ?? []) }
    }

    /// A group's or folder's path ('/'-separated, each part named as a label is) below `base`.
    private func dictionary(of group: CSVField?, in csv: CSVText, below base: VaultPath) throws(VaultError) -> VaultPath {
        guard let group else { return base }
        var parts: [ItemName] = []
        try csv.bytes.withUnsafeBytes { (all) throws(VaultError) in
            for part in UnsafeRawBufferPointer(rebasing: all[group.range]).split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true) {
                let label = try SecureBuffer(copying: UnsafeRawBufferPointer(rebasing: part))
                parts.append(try ItemName(base: try ItemName.base(fromLabel: label), number: 1))
            }
        }
        // KeePassXC names every group from the root group down; the root is the format's dictionary.
        if self == .keepassxc && !parts.isEmpty { parts.removeFirst() }
        return VaultPath(components: base.components + parts)
    }

    /// A field's bytes, or none for an empty or missing one.
    private static func copy(_ field: CSVField?, in csv: CSVText) throws(VaultError) -> SecureBuffer {
        guard let field else { return try SecureBuffer(capacity: 0) }
        return try csv.copy(field)
    }

    private static func joined(_ field: CSVField?, _ suffix: String, in csv: CSVText) throws(VaultError) -> SecureBuffer {
        let tail = Array(suffix.utf8)
        var joined = try SecureBuffer(capacity: (field?.range.count ?? 0) + tail.count)
        joined.withUnsafeMutableStorage { storage in
            var used = 0
            if let field {
                csv.bytes.withUnsafeBytes { all in
                    let bytes = UnsafeRawBufferPointer(rebasing: all[field.range])
                    if bytes.count > 0 { storage.baseAddress!.copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
                    used = bytes.count
                }
            }
            for byte in tail {
                storage[used] = byte
                used += 1
            }
            return used
        }
        return joined
    }
}
