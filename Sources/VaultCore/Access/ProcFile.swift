import SystemCalls
import SystemPackage

/// Whole /proc files read with read(2): a /proc file is generated as it is read, and readers
/// that stop at the first short read (as Foundation's may) see part of it.
enum ProcFile {
    /// The bytes of `name` relative to the directory `directory`, nil when it cannot be read
    /// (the process is gone, or is not ours to see).
    static func contents(_ name: String, in directory: Int32) -> [UInt8]? {
        try? FileDescriptor.contents(of: name, in: FileDescriptor(rawValue: directory))
    }
}
