import Glibc

enum Terminal {
    static func printError(_ message: String) {
        writeAll(2, "keychainfs: " + message.replacingOccurrences(of: "\n", with: " ") + "\n")
    }

    static func printInfo(_ message: String) {
        writeAll(2, message + "\n")
    }

    static func writeAll(_ fd: Int32, _ text: String) {
        var text = text
        text.withUTF8 { _ = writeAll(fd, UnsafeRawBufferPointer($0)) }
    }

    /// Writes every byte, retrying short writes; false on error (such as EPIPE).
    @discardableResult
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += n
        }
        return true
    }
}

extension String {
    func replacingOccurrences(of target: String, with replacement: String) -> String {
        split(separator: Character(target), omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
