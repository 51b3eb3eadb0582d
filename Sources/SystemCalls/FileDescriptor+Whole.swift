import Glibc
import SystemPackage

extension FileDescriptor {
    /// Reads until `buffer` is full or the file ends; the count read. A short read is not the
    /// end: pipes, sockets and FUSE files answer in pieces.
    package func readFully(into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        var total = 0
        while total < buffer.count {
            let got = try SystemCall.typed { try read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[total...])) }
            if got == 0 { break }
            total += got
        }
        return total
    }

    /// Writes all of `bytes`, however many calls it takes.
    package func writeFully(_ bytes: UnsafeRawBufferPointer) throws(Errno) {
        var done = 0
        while done < bytes.count {
            done += try SystemCall.typed { try write(UnsafeRawBufferPointer(rebasing: bytes[done...])) }
        }
    }

    package func sync() throws(Errno) {
        try SystemCall.retrying { fsync(rawValue) }
    }

    /// Everything up to the end of the file (a pipe's writer closing it). For what is no secret
    /// (/proc files, a child's messages, requests): the bytes land in an ordinary Array.
    package func readToEnd() throws(Errno) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let got = try SystemCall.typed { try chunk.withUnsafeMutableBytes { try read(into: $0) } }
            if got == 0 { return bytes }
            bytes += chunk[..<got]
        }
    }

    /// One line, read a byte at a time so nothing after it is consumed: the bytes before the
    /// newline, or all there were when the file ended, a read failed (a socket's receive
    /// timeout) or `limit` bytes came.
    package func readLine(limit: Int = .max) -> [UInt8] {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while bytes.count < limit {
            let got = try? withUnsafeMutableBytes(of: &byte) { try read(into: $0) }
            if got != 1 || byte == 0x0A { break }
            bytes.append(byte)
        }
        return bytes
    }

    /// The whole of a small file that is no secret, such as /proc/PID/status: opened, read to
    /// its end (a /proc file is generated as it is read, and a reader that stops at the first
    /// short read sees part of it), closed. `path` is relative to `directory` when given.
    package static func contents(of path: String, in directory: FileDescriptor? = nil) throws(Errno) -> [UInt8] {
        let fd = try SystemCall.retrying { openat(directory?.rawValue ?? AT_FDCWD, path, O_RDONLY | O_CLOEXEC) }
        let file = FileDescriptor(rawValue: fd)
        defer { _ = try? file.close() }
        return try file.readToEnd()
    }
}
