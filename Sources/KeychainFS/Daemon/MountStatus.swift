import Glibc

/// What `keychainfs status` reports of a mount.
struct MountStatus {
    let mountpoint: String
    let vault: String
    let pid: pid_t
    let locked: Bool
    let items: Int?
    let idleLockSeconds: Int?
    let idleSeconds: Int64

    var json: String {
        let idle = idleLockSeconds.map { String($0) } ?? "null"
        let locksIn = idleLockSeconds.map { String(max(0, Int64($0) - idleSeconds)) } ?? "null"
        return "{\"mountpoint\":\(JSON.string(mountpoint)),\"vault\":\(JSON.string(vault)),\"pid\":\(pid),"
            + "\"locked\":\(locked),\"items\":\(items.map(String.init) ?? "null"),\"idle_lock_seconds\":\(idle),"
            + "\"idle_seconds\":\(idleSeconds),\"locks_in_seconds\":\(locked ? "null" : locksIn)}"
    }
}

enum JSON {
    static func string(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}
