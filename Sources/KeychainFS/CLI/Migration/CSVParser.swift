import VaultCore

/// RFC 4180 CSV, read from locked memory into locked memory: fields separated by commas,
/// records by CRLF (a lone LF or CR too, as exports from Unix tools end them); a field in
/// double quotes may hold commas, line breaks and quotes doubled (""). A UTF-8 byte order mark
/// at the start is skipped; a blank line is no record. Anything else is an error naming
/// the line where its record starts (and never quoting the file): a quote inside an unquoted
/// field, text after a closing quote, a quote left open at the end.
enum CSVParser {
    static func parse(_ input: UnsafeRawBufferPointer, file: String) throws(VaultError) -> [[CSVField]] {
        var position = 0
        if input.count >= 3 && input[0] == 0xEF && input[1] == 0xBB && input[2] == 0xBF { position = 3 }
        var line = 1
        var records: [[CSVField]] = []
        while position < input.count {
            let recordLine = line
            var record: [CSVField] = []
            fields: while true {
                record.append(try parseField(input, at: &position, line: &line, file: file, recordLine: recordLine))
                guard position < input.count else { break fields }
                switch input[position] {
                case comma:
                    // A comma as the last byte: the next parse gives the empty last field.
                    position += 1
                case carriageReturn, lineFeed:
                    if input[position] == carriageReturn && position + 1 < input.count && input[position + 1] == lineFeed { position += 1 }
                    position += 1
                    line += 1
                    break fields
                default:
                    throw .invalidArgument("\(file): the record of line \(recordLine): text after a field's closing quote")
                }
            }
            // A blank line is no record.
            if record.count == 1 && record[0].isEmpty { continue }
            records.append(record)
        }
        return records
    }

    private static let comma = UInt8(ascii: ",")
    private static let quote = UInt8(ascii: "\"")
    private static let carriageReturn = UInt8(ascii: "\r")
    private static let lineFeed = UInt8(ascii: "\n")

    /// One field from `position`, leaving it at the separator after it (or the end).
    private static func parseField(_ input: UnsafeRawBufferPointer, at position: inout Int, line: inout Int,
                                   file: String, recordLine: Int) throws(VaultError) -> CSVField {
        guard position < input.count, input[position] == quote else {
            let start = position
            while position < input.count, ![comma, carriageReturn, lineFeed].contains(input[position]) {
                guard input[position] != quote else {
                    throw .invalidArgument("\(file): the record of line \(recordLine): a quote inside an unquoted field")
                }
                position += 1
            }
            return CSVField(try SecureBuffer(copying: UnsafeRawBufferPointer(rebasing: input[start..<position])))
        }
        // The unquoted value is never longer than the quoted span: it is written straight into
        // locked memory of that size, the rest wiped.
        let start = position + 1
        var end = start
        while true {
            guard end < input.count else {
                throw .invalidArgument("\(file): the record of line \(recordLine): a quoted field is not closed by the end of the file")
            }
            if input[end] == quote {
                if end + 1 < input.count && input[end + 1] == quote { end += 2; continue }
                break
            }
            end += 1
        }
        var value = try SecureBuffer(capacity: end - start)
        var lines = 0
        value.withUnsafeMutableStorage { storage in
            var used = 0
            var index = start
            while index < end {
                let byte = input[index]
                storage[used] = byte
                used += 1
                if byte == lineFeed || (byte == carriageReturn && !(index + 1 < end && input[index + 1] == lineFeed)) { lines += 1 }
                index += byte == quote ? 2 : 1
            }
            return used
        }
        line += lines
        position = end + 1
        return CSVField(value)
    }
}
