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
        var keys: [ItemName] = []
        var entries: [ItemName: PortableEntry] = [:]
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
            guard position > keyStart, !(0x30...0x39).contains(bytes[keyStart]) else { throw failure("expected KEY=VALUE") }
            let key = try ItemName(bytes: UnsafeRawBufferPointer(rebasing: bytes[keyStart..<position]))
            skipBlanks()
            guard at(position) == UInt8(ascii: "=") else { throw failure("expected '=' after \(key)") }
            position += 1
            skipBlanks()
            var value: SecureBuffer
            if let quote = at(position), quote == UInt8(ascii: "\"") || quote == UInt8(ascii: "'") || quote == UInt8(ascii: "`") {
                // Where the value ends first, so its buffer is no bigger than it.
                var close = position + 1
                while let byte = at(close), byte != quote { close += quote == UInt8(ascii: "\"") && byte == UInt8(ascii: "\\") ? 2 : 1 }
                guard close < bytes.count else { throw failure("the quoted value of \(key) is not closed") }
                value = try SecureBuffer(capacity: close - position - 1)
                position += 1
                value.withUnsafeMutableStorage { out in
                    var count = 0
                    while position < close {
                        var byte = bytes[position]
                        position += 1
                        if byte == 0x0A { line += 1 }
                        if quote == UInt8(ascii: "\""), byte == UInt8(ascii: "\\"), position < close {
                            switch bytes[position] {
                            case UInt8(ascii: "n"): byte = 0x0A
                            case UInt8(ascii: "r"): byte = 0x0D
                            case UInt8(ascii: "t"): byte = 0x09
                            case UInt8(ascii: "\""), UInt8(ascii: "\\"): byte = bytes[position]
                            default: position -= 1  // kept as written, backslash and all
                            }
                            position += 1
                        }
                        out[count] = byte
                        count += 1
                    }
                    return count
                }
                position = close + 1
            } else {
                // Up to the line's end or a comment ('#' after a blank, or first), trimmed.
                var end = position
                while let byte = at(end), byte != 0x0A, !(byte == UInt8(ascii: "#") && (end == position || isBlank(at(end - 1)))) { end += 1 }
                var trimmed = end
                while trimmed > position, isBlank(at(trimmed - 1)) || at(trimmed - 1) == 0x0D { trimmed -= 1 }
                value = try SecureBuffer(copying: UnsafeRawBufferPointer(rebasing: bytes[position..<trimmed]))
                position = end
            }
            try endOfLine()
            let entry = PortableEntry(item: dictionary.appending(key), content: value)
            if entries.updateValue(entry, forKey: key) == nil { keys.append(key) }
        }
        return keys.map { entries[$0]! }
    }

    private static func isKeyByte(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-")
    }
}
