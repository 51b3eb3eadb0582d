import Glibc
import VaultCore

/// The secret values `keychainfs exec` passed to its command, to be found in the command's
/// output and replaced by `placeholder` (as 1Password's `op run` does). They live in locked
/// memory; shared, read only, by the relays of standard output and error.
final class OutputMask: @unchecked Sendable {
    static let placeholder: StaticString = "<concealed by keychainfs>"
    /// Shorter values are passed unmasked: a 1 to 3 byte secret ("on", "80", a digit) would
    /// also conceal ordinary text, and says little about the secret that it hides.
    static let minimumLength = 4

    private let values: SecureBuffer
    /// Each value's bytes in `values`, longest first: at a place where two match, the longer wins.
    private let ranges: [Range<Int>]
    /// Bytes a relay holds back at most: a secret may straddle two reads.
    let longest: Int

    /// nil when no value is long enough to be masked.
    init?(_ values: consuming SecureBuffer, ranges: [Range<Int>]) {
        let kept = ranges.filter { $0.count >= Self.minimumLength }.sorted { $0.count > $1.count }
        guard let first = kept.first else { return nil }
        self.values = values
        self.ranges = kept
        longest = first.count
    }

    /// Emits `data` with every value replaced. Unless `final`, stops before a place where
    /// the data ends inside what may be the start of a value, and returns how many bytes it
    /// emitted (the caller keeps the rest for the next read); nil once `emit` fails.
    func scan(_ data: UnsafeRawBufferPointer, final: Bool, emit: (UnsafeRawBufferPointer) -> Bool) -> Int? {
        values.withUnsafeBytes { secrets in
            guard let base = data.baseAddress, let secretsBase = secrets.baseAddress else { return emit(data) ? data.count : nil }
            var start = 0, index = 0
            func emitFrom(_ start: Int, to end: Int) -> Bool {
                end == start || emit(UnsafeRawBufferPointer(start: base + start, count: end - start))
            }
            // Where each value's first byte next occurs, found by memchr: most output holds
            // none, and a loop over every byte is slow.
            var next = [Int](repeating: -1, count: ranges.count)
            scanning: while true {
                for (slot, range) in ranges.enumerated() where next[slot] < index {
                    let found = memchr(base + index, Int32(secrets[range.lowerBound]), data.count - index)
                    next[slot] = found.map { base.distance(to: UnsafeRawPointer($0)) } ?? data.count
                }
                index = next.min() ?? data.count
                guard index < data.count else { break }
                let byte = data[index]
                for range in ranges where secrets[range.lowerBound] == byte {
                    let available = min(range.count, data.count - index)
                    guard memcmp(base + index, secretsBase + range.lowerBound, available) == 0 else { continue }
                    if available < range.count {
                        if final { continue }
                        return emitFrom(start, to: index) ? index : nil
                    }
                    let placeholder = UnsafeRawBufferPointer(start: Self.placeholder.utf8Start, count: Self.placeholder.utf8CodeUnitCount)
                    guard emitFrom(start, to: index), emit(placeholder) else { return nil }
                    index += range.count
                    start = index
                    continue scanning
                }
                index += 1
            }
            return emitFrom(start, to: data.count) ? data.count : nil
        }
    }
}
