import Glibc

/// Mount table queries (/proc/self/mountinfo), with its octal escapes undone.
package enum MountTable {
    struct Entry {
        let mountpoint: String
        let fsType: String
        /// What the mount names as its source: for ours, the vault (`FUSESession`).
        var source = ""
    }

    static func entries() -> [Entry] {
        guard let file = fopen("/proc/self/mountinfo", "r") else { return [] }
        defer { fclose(file) }
        var result: [Entry] = []
        var line: UnsafeMutablePointer<CChar>? = nil
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) > 0 {
            let fields = String(cString: line!).split(separator: " ")
            guard let dash = fields.firstIndex(of: "-"), fields.count > dash + 1, fields.count > 4 else { continue }
            result.append(Entry(mountpoint: unescape(String(fields[4])), fsType: String(fields[dash + 1]),
                                source: fields.count > dash + 2 ? unescape(String(fields[dash + 2])) : ""))
        }
        return result
    }

    package static func isKeychainFSMount(_ path: String) -> Bool {
        entries().contains { $0.mountpoint == path && $0.fsType == "fuse.keychainfs" }
    }

    /// Whether one of our mounts serves the vault file with this device and inode, whatever
    /// path named it.
    static func servesVault(device: UInt64, inode: UInt64) -> Bool {
        entries().contains { entry in
            var info = stat()
            return entry.fsType == "fuse.keychainfs" && entry.source.hasPrefix("/") && stat(entry.source, &info) == 0
                && UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
        }
    }

    static func isMountpoint(_ path: String) -> Bool {
        entries().contains { $0.mountpoint == path }
    }

    private static func unescape(_ text: String) -> String {
        var out: [UInt8] = []
        let bytes = Array(text.utf8)
        var i = 0
        while i < bytes.count {
            if bytes[i] == 0x5C, i + 3 < bytes.count, let value = UInt8(String(decoding: bytes[(i + 1)...(i + 3)], as: UTF8.self), radix: 8) {
                out.append(value)
                i += 4
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
