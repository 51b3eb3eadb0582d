import CLinux
import Glibc
import SystemPackage

/// A file that appears whole or not at all (key files): written to a hidden temporary beside
/// it, made durable, then linked to its name. `link` fails with EEXIST where a file already is,
/// so a new file never replaces one (two first uses at once keep the first), and a crash leaves
/// at most a temporary, never a short key.
package enum NewFile {
    package static func create(at path: String, permissions: FilePermissions = [.ownerRead, .ownerWrite],
                               contents: UnsafeRawBufferPointer) throws(Errno) {
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) }.flatMap { $0.isEmpty ? "/" : $0 } ?? "."
        var template = Array((directory + "/.keychainfs-new-XXXXXX").utf8CString)
        let fd = try template.withUnsafeMutableBufferPointer { (name) throws(Errno) in
            try SystemCall.retrying { clinux_mkostemp(name.baseAddress!, O_CLOEXEC) }
        }
        let temporary = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let file = FileDescriptor(rawValue: fd)
        var linked = false
        defer {
            _ = try? file.close()
            unlink(temporary)
            if linked { syncDirectory(directory) }
        }
        try SystemCall.retrying { fchmod(fd, permissions.rawValue) }
        try file.writeFully(contents)
        try file.sync()
        try SystemCall.retrying { link(temporary, path) }
        linked = true
    }

    /// The new name is durable once its directory is.
    private static func syncDirectory(_ directory: String) {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }
}
