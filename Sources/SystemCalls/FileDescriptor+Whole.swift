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
}
