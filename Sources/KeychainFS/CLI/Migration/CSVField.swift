import VaultCore

/// One field of a CSV record, unquoted, in locked memory: exports of password managers are
/// secrets from the first byte to the last.
final class CSVField {
    let bytes: SecureBuffer

    init(_ bytes: consuming SecureBuffer) {
        self.bytes = bytes
    }

    var isEmpty: Bool { bytes.count == 0 }

    /// Only for what is no secret: a header's column names.
    var text: String { bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }
}
