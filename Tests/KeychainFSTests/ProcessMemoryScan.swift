import Foundation
import Glibc

/// Which of `needles` occur anywhere in a process's readable memory (every region of
/// /proc/PID/maps, thread stacks included), read once for all of them.
func processMemoryHits(_ pid: pid_t, _ needles: [[UInt8]]) -> Set<Int> {
    let maps = procText("/proc/\(pid)/maps")
    let mem = open("/proc/\(pid)/mem", O_RDONLY)
    guard mem >= 0 else { return [] }
    defer { close(mem) }
    let overlap = needles.map(\.count).max() ?? 0
    var hits = Set<Int>()
    for line in maps.split(separator: "\n") {
        let fields = line.split(separator: " ")
        guard fields.count >= 2, fields[1].hasPrefix("r") else { continue }
        let bounds = fields[0].split(separator: "-").compactMap { UInt64($0, radix: 16) }
        guard bounds.count == 2, bounds[1] > bounds[0] else { continue }
        var offset = bounds[0]
        while offset < bounds[1] {
            let length = Int(min(bounds[1] - offset, 16 << 20))
            var chunk = [UInt8](repeating: 0, count: length)
            let n = chunk.withUnsafeMutableBytes { pread(mem, $0.baseAddress, length, off_t(Int64(bitPattern: offset))) }
            if n <= 0 { break }
            let data = Data(chunk[0..<n])
            for (index, needle) in needles.enumerated() where !hits.contains(index) {
                if data.range(of: Data(needle)) != nil { hits.insert(index) }
            }
            offset += UInt64(max(n - overlap, 1))
        }
    }
    return hits
}

/// Whether `needle` occurs anywhere in a process's readable memory (we are root).
func processMemoryContains(_ pid: pid_t, _ needle: [UInt8]) -> Bool {
    !processMemoryHits(pid, [needle]).isEmpty
}
