import Glibc
import SystemPackage

/// The one place a raw system call's -1 becomes a typed `Errno` and an interrupted call is
/// made again. swift-system covers descriptors and files; this covers the calls it does not
/// (sockets, pidfds, ioctls), so no caller reads `errno` or loops on EINTR itself.
package enum SystemCall {
    /// Runs `call` again while it fails with EINTR; -1 becomes the errno it left.
    @discardableResult
    @inlinable
    package static func retrying<Result: FixedWidthInteger>(_ call: () -> Result) throws(Errno) -> Result {
        while true {
            let result = call()
            if result != -1 { return result }
            let error = Errno.last
            if error != .interrupted { throw error }
        }
    }

    /// Runs `call` once (for calls that must not be repeated, like close); -1 becomes the errno it left.
    @discardableResult
    @inlinable
    package static func once<Result: FixedWidthInteger>(_ call: () -> Result) throws(Errno) -> Result {
        let result = call()
        if result == -1 { throw Errno.last }
        return result
    }

    /// Runs a swift-system call, whose throws are untyped but only ever `Errno`.
    @inlinable
    package static func typed<Result>(_ call: () throws -> Result) throws(Errno) -> Result {
        do { return try call() } catch let error as Errno { throw error } catch { throw .ioError }
    }
}

extension Errno {
    /// The errno the last failed call on this thread left.
    @inlinable
    package static var last: Errno { Errno(rawValue: Glibc.errno) }

    /// The error a library reports by returning it negated (sd-bus, libfuse, sd_notify).
    package init(negatedReturn rc: Int32) {
        self.init(rawValue: -rc)
    }
}
