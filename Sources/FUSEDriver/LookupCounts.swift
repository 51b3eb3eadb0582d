/// How many references the kernel holds to each inode (what it may keep in its caches), so a
/// lock can tell it to drop exactly those.
struct LookupCounts {
    private var counts: [UInt64: UInt64] = [:]

    mutating func add(_ inode: UInt64) {
        counts[inode, default: 0] += 1
    }

    mutating func forget(_ inode: UInt64, count: UInt64) {
        guard let known = counts[inode] else { return }
        counts[inode] = known > count ? known - count : nil
    }

    var inodes: Dictionary<UInt64, UInt64>.Keys { counts.keys }
}
