@testable import KeychainFS
import Testing
import VaultCore

/// The scan itself, fed in pieces as a relay's reads would come.
@Suite struct OutputMaskTests {
    private func masked(_ pieces: [String], values: [String]) throws -> String {
        var buffer = try SecureBuffer(capacity: 256)
        var ranges: [Range<Int>] = []
        for value in values {
            let start = buffer.count
            try Array(value.utf8).withUnsafeBytes { raw in Result { () throws(VaultError) in try buffer.append(raw) } }.get()
            ranges.append(start..<buffer.count)
        }
        // Not #require: its macro cannot take a non-copyable argument.
        guard let mask = OutputMask(buffer, ranges: ranges) else {
            Issue.record("no value long enough to mask")
            return ""
        }
        var output: [UInt8] = [], held: [UInt8] = []
        for (number, piece) in pieces.enumerated() {
            let data = held + Array(piece.utf8)
            let emitted = data.withUnsafeBytes { bytes in
                mask.scan(bytes, final: number == pieces.count - 1) { output += $0; return true }
            }
            held = Array(data[try #require(emitted)...])
        }
        #expect(held.isEmpty)
        return String(decoding: output, as: UTF8.self)
    }

    @Test func aValueSplitAtAnyPlaceIsConcealed() throws {
        let text = "x sek-ret-0123456789 y"
        for cut in 0...text.utf8.count {
            let bytes = Array(text.utf8)
            let pieces = [String(decoding: bytes[..<cut], as: UTF8.self), String(decoding: bytes[cut...], as: UTF8.self), ""]
            #expect(try masked(pieces, values: ["sek-ret-0123456789"]) == "x <concealed by keychainfs> y", "cut at \(cut)")
        }
    }

    @Test func theLongerOfTwoValuesWinsAndAFalseStartIsPassedOn() throws {
        #expect(try masked(["a sek-ret", "-0123 sek-ret-0123456789", ""], values: ["sek-ret", "sek-ret-0123456789"])
                == "a <concealed by keychainfs>-0123 <concealed by keychainfs>")
        #expect(try masked(["sek-re", "t! abc"], values: ["sek-ret-0123456789", "abc", "t! a"]) == "sek-re<concealed by keychainfs>bc")
    }

    @Test func valuesUnderFourBytesAreNotMasked() throws {
        let onlyShort = OutputMask(try SecureBuffer(capacity: 8), ranges: [0..<3])
        #expect(onlyShort == nil)
        #expect(try masked(["abc abcd", ""], values: ["abc", "abcd"]) == "abc <concealed by keychainfs>")
    }
}
