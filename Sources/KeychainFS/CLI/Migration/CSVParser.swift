import VaultCore

/// RFC 4180 CSV, read from locked memory into locked memory: fields separated by commas,
/// records by CRLF (a lone LF or CR too, as exports from Unix tools end them); a field in
/// double quotes may hold commas, line breaks and quotes doubled (""). A UTF-8 byte order mark
/// at the start is skipped; a blank line is no record. Anything else is an error naming the
/// line where its record starts (and never quoting the file): a quote inside an unquoted
/// field, text after a closing quote, a quote left open at the end.
enum CSVParser {
    static func parse(_ input: UnsafeRawBufferPointer, file: String) throws(VaultError) -> CSVText {
        // Unquoted, the fields are never longer than the file.
        var output = try SecureBuffer(capacity: input.count)
        var records: [[CSVField]] = []
        var failure: VaultError?
        output.withUnsafeMutableStorage { storage in
            var parser = Parser(input: input, output: storage, file: file)
            do throws(VaultError) {
                records = try parser.records()
            } catch {
                failure = error
            }
            return parser.used
        }
        if let failure { throw failure }
        return CSVText(bytes: output, records: records)
    }

    private static let comma = UInt8(ascii: ",")
    private static let quote = UInt8(ascii: "\"")
    private static let carriageReturn = UInt8(ascii: "\r")
    private static let lineFeed = UInt8(ascii: "\n")

    private struct Parser {
        let input: UnsafeRawBufferPointer
        let output: UnsafeMutableRawBufferPointer
        let file: String
        var position = 0
        var line = 1
        var used = 0

        init(input: UnsafeRawBufferPointer, output: UnsafeMutableRawBufferPointer, file: String) {
            self.input = input
            self.output = output
            self.file = file
            if input.count >= 3 && input[0] == 0xEF && input[1] == 0xBB && input[2] == 0xBF { position = 3 }
        }

        mutating func records() throws(VaultError) -> [[CSVField]] {
            var records: [[CSVField]] = []
            while position < input.count {
                let recordLine = line
                var record: [CSVField] = []
                fields: while true {
                    record.append(try field(recordLine: recordLine))
                    guard position < input.count else { break fields }
                    switch input[position] {
                    case comma:
                        // A comma as the last byte: the next field is the empty last one.
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

        /// One field from `position`, leaving it at the separator after it (or the end).
        private mutating func field(recordLine: Int) throws(VaultError) -> CSVField {
            let start = used
            guard position < input.count, input[position] == quote else {
                while position < input.count, input[position] != comma, input[position] != carriageReturn, input[position] != lineFeed {
                    guard input[position] != quote else {
                        throw .invalidArgument("\(file): the record of line \(recordLine): a quote inside an unquoted field")
                    }
                    put(input[position])
                    position += 1
                }
                return CSVField(range: start..<used)
            }
            position += 1
            while true {
                guard position < input.count else {
                    throw .invalidArgument("\(file): the record of line \(recordLine): a quoted field is not closed by the end of the file")
                }
                let byte = input[position]
                if byte == quote {
                    guard position + 1 < input.count && input[position + 1] == quote else { break }
                    position += 1
                }
                if byte == lineFeed || (byte == carriageReturn && !(position + 1 < input.count && input[position + 1] == lineFeed)) { line += 1 }
                put(byte)
                position += 1
            }
            position += 1
            return CSVField(range: start..<used)
        }

        private mutating func put(_ byte: UInt8) {
            output[used] = byte
            used += 1
        }
    }
}
