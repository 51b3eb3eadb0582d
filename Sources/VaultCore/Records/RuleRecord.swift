/// The plaintext of a node's sealed rule record: its rules in a small versioned binary layout.
/// Executable paths and unit names are not secrets (they name programs, not secrets), so the
/// plaintext passes through ordinary arrays; the record is sealed because a rule must not be
/// changed, moved or forged, and the node it belongs to (whose path is secret) is only its id.
///
/// Layout 1: the layout byte, the number of rules (2 bytes), then per rule a kind byte
/// (1 executable, 2 unit), a flags byte (1 read-only, 2 confirm) and
/// - executable: path length (2 bytes), path, device (8 bytes), inode (8 bytes);
/// - unit: name length (2 bytes), name.
/// Layout 2 is layout 1 with, after each executable's inode, a byte saying whether its file's
/// fingerprint follows (1) or not (0: a rule kept from layout 1), then its size, modification
/// and change times in nanoseconds (8 bytes each). A record with no fingerprint is still
/// written in layout 1, which older versions read.
/// Integers are little-endian. Anything else (unknown bytes, flags, trailing bytes) is refused.
/// The record is sealed as a whole whatever its layout, so a fingerprint is as authenticated
/// as the path it belongs to, and a layout-2 record cannot be passed off as layout 1.
enum RuleRecord {
    static let layout: UInt8 = 2
    static let layoutWithoutFingerprints: UInt8 = 1
    private static let executableKind: UInt8 = 1, unitKind: UInt8 = 2
    private static let readOnlyFlag: UInt8 = 1, confirmFlag: UInt8 = 2
    /// What a 2-byte length holds, and what a record may hold.
    static let maximumRules = 0xFFFF
    static let maximumTextBytes = 0xFFFF

    static func encode(_ rules: [AccessRule]) -> [UInt8] {
        precondition(rules.count <= maximumRules, "too many rules for one record")
        let fingerprinted = rules.contains { rule in
            if case .executable(_, _, _, .some) = rule.principal { true } else { false }
        }
        var out: [UInt8] = [fingerprinted ? layout : layoutWithoutFingerprints]
        out.appendLittleEndian(UInt64(rules.count), width: 2)
        for rule in rules {
            let flags = (rule.readOnly ? readOnlyFlag : 0) | (rule.confirm ? confirmFlag : 0)
            switch rule.principal {
            case .executable(let path, let device, let inode, let fingerprint):
                out += [executableKind, flags]
                appendText(path, to: &out)
                out.appendLittleEndian(device)
                out.appendLittleEndian(inode)
                guard fingerprinted else { break }
                if let fingerprint {
                    out.append(1)
                    out.appendLittleEndian(fingerprint.size)
                    out.appendLittleEndian(UInt64(bitPattern: fingerprint.modified))
                    out.appendLittleEndian(UInt64(bitPattern: fingerprint.changed))
                } else {
                    out.append(0)
                }
            case .unit(let name):
                out += [unitKind, flags]
                appendText(name, to: &out)
            }
        }
        return out
    }

    private static func appendText(_ text: String, to out: inout [UInt8]) {
        let bytes = Array(text.utf8)
        precondition(bytes.count <= maximumTextBytes, "a principal's name too long for its record")
        out.appendLittleEndian(UInt64(bytes.count), width: 2)
        out += bytes
    }

    /// nil for anything but a well-formed record of layout 1 or 2.
    static func decode(_ bytes: [UInt8]) -> [AccessRule]? {
        bytes.withUnsafeBytes { raw -> [AccessRule]? in
            var reader = Reader(bytes: raw)
            guard let layout = reader.byte(), layout == self.layout || layout == layoutWithoutFingerprints,
                  let count = reader.integer(width: 2) else { return nil }
            var rules: [AccessRule] = []
            for _ in 0..<count {
                guard let kind = reader.byte(), let flags = reader.byte(), flags & ~(readOnlyFlag | confirmFlag) == 0 else { return nil }
                let principal: Principal
                switch kind {
                case executableKind:
                    guard let path = reader.text(), path.hasPrefix("/"), let device = reader.integer(width: 8),
                          let inode = reader.integer(width: 8) else { return nil }
                    var fingerprint: FileFingerprint?
                    if layout == self.layout {
                        switch reader.byte() {
                        case 0:
                            break
                        case 1:
                            guard let size = reader.integer(width: 8), let modified = reader.integer(width: 8),
                                  let changed = reader.integer(width: 8) else { return nil }
                            fingerprint = FileFingerprint(size: size, modified: Int64(bitPattern: modified), changed: Int64(bitPattern: changed))
                        default:
                            return nil
                        }
                    }
                    principal = .executable(path: path, device: device, inode: inode, fingerprint: fingerprint)
                case unitKind:
                    guard let name = reader.text(), !name.contains("/"), ProcessIdentity.unit(inCgroup: name) == name else { return nil }
                    principal = .unit(name)
                default:
                    return nil
                }
                rules.append(AccessRule(principal, readOnly: flags & readOnlyFlag != 0, confirm: flags & confirmFlag != 0))
            }
            return reader.atEnd ? rules : nil
        }
    }

    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        var offset = 0

        var atEnd: Bool { offset == bytes.count }

        mutating func byte() -> UInt8? {
            integer(width: 1).map { UInt8($0) }
        }

        mutating func integer(width: Int) -> UInt64? {
            guard bytes.count - offset >= width else { return nil }
            defer { offset += width }
            return bytes.load(at: offset, width: width)
        }

        /// UTF-8 text without NUL bytes, after its 2-byte length.
        mutating func text() -> String? {
            guard let count = integer(width: 2).map(Int.init), bytes.count - offset >= count else { return nil }
            let slice = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)])
            offset += count
            guard !slice.contains(0), let text = String(validating: slice, as: UTF8.self) else { return nil }
            return text
        }
    }
}
