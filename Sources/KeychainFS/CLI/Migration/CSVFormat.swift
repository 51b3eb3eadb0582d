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
    var columns: [Role: String] {
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

    var required: Set<Role> { [.title, .password] }

    /// A group's or folder's path ('/'-separated, each part named as a label is) below `base`.
    func dictionary(of group: CSVField?, in csv: CSVText, below base: VaultPath) throws(VaultError) -> VaultPath {
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
    static func copy(_ field: CSVField?, in csv: CSVText) throws(VaultError) -> SecureBuffer {
        guard let field else { return try SecureBuffer(capacity: 0) }
        return try csv.copy(field)
    }

    static func joined(_ field: CSVField?, _ suffix: String, in csv: CSVText) throws(VaultError) -> SecureBuffer {
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
