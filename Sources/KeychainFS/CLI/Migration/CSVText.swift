import VaultCore

/// Every field of a CSV file, unquoted, one after another in one buffer of locked memory, and
/// the records as ranges into it. One buffer, not one per field: each buffer of locked memory
/// takes a page of RLIMIT_MEMLOCK, and an export of a few hundred rows of ten columns would
/// exhaust Debian's 8 MiB before a single item was stored.
final class CSVText {
    let bytes: SecureBuffer
    let records: [[CSVField]]

    init(bytes: consuming SecureBuffer, records: [[CSVField]]) {
        self.bytes = bytes
        self.records = records
    }

    /// A field's bytes in locked memory of their own, as an item or attribute keeps them.
    func copy(_ field: CSVField) throws(VaultError) -> SecureBuffer {
        try bytes.withUnsafeBytes { (all) throws(VaultError) in try SecureBuffer(copying: UnsafeRawBufferPointer(rebasing: all[field.range])) }
    }

    func equals(_ field: CSVField, _ text: String) -> Bool {
        bytes.withUnsafeBytes { $0[field.range].elementsEqual(text.utf8) }
    }

    /// Only for what is no secret: a header's column names.
    func text(_ field: CSVField) -> String {
        bytes.withUnsafeBytes { String(decoding: $0[field.range], as: UTF8.self) }
    }
}
