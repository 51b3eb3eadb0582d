import Glibc
import SystemCalls
import SystemPackage

package enum Terminal {
    /// `text` with control characters (C0, DEL and C1, whose U+009B some terminals take for
    /// CSI) shown as `?`: a name or path that holds a newline or an escape would otherwise
    /// forge lines, or drive the terminal, where it is printed. Every human-readable output
    /// of names and paths goes through it; JSON output is exact.
    package static func printable(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.map { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) ? "?" : $0 }))
    }

    package static func printError(_ message: String) {
        writeAll(2, "keychainfs: " + printable(message.replacingOccurrences(of: "\n", with: " ")) + "\n")
    }

    package static func printInfo(_ message: String) {
        writeAll(2, message + "\n")
    }

    package static func writeAll(_ fd: Int32, _ text: String) {
        var text = text
        text.withUTF8 { _ = writeAll(fd, UnsafeRawBufferPointer($0)) }
    }

    /// Writes every byte, retrying short writes; false on error (such as EPIPE).
    @discardableResult
    package static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        (try? FileDescriptor(rawValue: fd).writeFully(bytes)) != nil
    }
}

extension String {
    /// Foundation's, without Foundation: every occurrence of `target` replaced, whatever its
    /// length (splitting on a Character trapped on a target of more than one).
    package func replacingOccurrences(of target: String, with replacement: String) -> String {
        target.isEmpty ? self : replacing(target, with: replacement)
    }
}
