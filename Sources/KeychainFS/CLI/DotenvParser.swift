import VaultCore

/// Reads a `.env` file as the dotenv libraries do: `KEY=VALUE` lines, an optional `export `
/// before the key, blank lines and `#` comments skipped; a value in double quotes may span
/// lines and has `\n`, `\r`, `\t`, `\"` and `\\` expanded; in single quotes or backquotes it is
/// taken as written; unquoted, it ends at the line's end or at a ` #` comment and is trimmed.
/// No `${VAR}` expansion. A key given twice keeps its last value, as sourcing the file would.
/// A line that is none of these is an error naming its number (never silently dropped).
/// Values go straight into locked memory.
enum DotenvParser {
    /// One item per key, named after it in `dictionary`.
    static func parse(_ bytes: UnsafeRawBufferPointer, file: String, into dictionary: VaultPath) throws(VaultError) -> [PortableEntry] {
        var position = 0
        var line = 1
        var keys: [String] = []
        var entries: [String: PortableEntry] = [:]
        func at(_ index: Int) -> UInt8? { index < bytes.count ? bytes[index] : nil }
        func isBlank(_ byte: UInt8?) -> Bool { byte == 0x20 || byte == 0x09 }
        func failure(_ reason: String) -> VaultError { .invalidArgument("\(file), line \(line): \(reason)") }
        func skipBlanks() { while isBlank(at(position)) || at(position) == 0x0D { position += 1 } }
        func endOfLine() throws(VaultError) {
            skipBlanks()
            if at(position) == UInt8(ascii: "#") { while let byte = at(position), byte != 0x0A { position += 1 } }
            guard at(position) == nil || at(position) == 0x0A else { throw failure("unexpected text after the value") }
            if at(position) == 0x0A { position += 1; line += 1 }
        }
        while position < bytes.count {
            skipBlanks()
            guard let first = at(position) else { break }
            if first == 0x0A { position += 1; line += 1; continue }
            if first == UInt8(ascii: "#") { try endOfLine(); continue }
            // `export KEY=...`, but a key named `export` still works.
            let exportWord = Array("export".utf8)
            if position + 6 < bytes.count, Array(bytes[position..<position + 6]) == exportWord, isBlank(at(position + 6)) {
                position += 6
                skipBlanks()
            }
            let keyStart = position
            while let byte = at(position), isKeyByte(byte) { position += 1 }
            let key = String(decoding: bytes[keyStart..<position], as: UTF8.self)
            guard !key.isEmpty, !(key.first!.isNumber) else { throw failure("expected KEY=VALUE") }
            skipBlanks()
            guard at(position) == UInt8(ascii: "=") else { throw failure("expected '=' after \(key)") }
            position += 1
            skipBlanks()
            var value = try SecureBuffer(capacity: max(bytes.count - position, 1))
            let quote = at(position)
            if quote == UInt8(ascii: "\"") || quote == UInt8(ascii: "'") || quote == UInt8(ascii: "`") {
                position += 1
                let startLine = line
                var closed = false
                try value.withUnsafeMutableStorage { (out) throws(VaultError) -> Int in
                    var count = 0
                    while let byte = at(position) {
                        position += 1
                        if byte == quote { closed = true; break }
                        if byte == 0x0A { line += 1 }
                        var emitted = byte
                        if quote == UInt8(ascii: "\""), byte == UInt8(ascii: "\\"), let next = at(position) {
                            switch next {
                            case UInt8(ascii: "n"): emitted = 0x0A
                            case UInt8(ascii: "r"): emitted = 0x0D
                            case UInt8(ascii: "t"): emitted = 0x09
                            case UInt8(ascii: "\""), UInt8(ascii: "\\"): emitted = next
                            default: emitted = byte
                            }
                            if emitted != byte || next == UInt8(ascii: "\\") { position += 1 }
                        }
                        out[count] = emitted
                        count += 1
                    }
                    return count
                }
                guard closed else {
                    line = startLine
                    throw failure("the quoted value of \(key) is not closed")
                }
                try endOfLine()
            } else {
                value.withUnsafeMutableStorage { out in
                    var count = 0
                    while let byte = at(position), byte != 0x0A {
                        // A comment starts at a '#' after a blank.
                        if byte == UInt8(ascii: "#"), count == 0 || isBlank(out[count - 1]) { break }
                        out[count] = byte
                        count += 1
                        position += 1
                    }
                    while count > 0, isBlank(out[count - 1]) || out[count - 1] == 0x0D { count -= 1; out[count] = 0 }
                    return count
                }
                try endOfLine()
            }
            let entry = PortableEntry(item: dictionary.appending(try ItemName(key)), content: value)
            if entries.updateValue(entry, forKey: key) == nil { keys.append(key) }
        }
        return keys.map { entries[$0]! }
    }

    private static func isKeyByte(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-")
    }
}
