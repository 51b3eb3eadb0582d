import Glibc

/// How requests travel between the kernel and the session loop: read(2) and write(2) on
/// /dev/fuse, or io_uring queues (Linux 6.14, `/sys/module/fuse/parameters/enable_uring`),
/// which save a system call each way and a wake-up per request (docs/performance.md).
package enum FUSETransport: String, Codable, Sendable, CaseIterable {
    case devFuse = "dev-fuse"
    case ioUring = "io-uring"
    /// io_uring when the kernel offers it, /dev/fuse otherwise.
    case auto

    /// The default for `--transport`: /dev/fuse, until the figures say otherwise
    /// (docs/performance.md). `KEYCHAINFS_TRANSPORT` changes it, so that a whole test suite
    /// runs on the other transport without a word of each test changing.
    package static var defaultChoice: FUSETransport {
        guard let name = getenv("KEYCHAINFS_TRANSPORT").map({ String(cString: $0) }),
              let choice = FUSETransport(rawValue: name) else { return .devFuse }
        return choice
    }

    /// Whether the fuse module serves io_uring queues now (root can switch it on).
    package static var kernelOffersIoUring: Bool {
        let fd = open("/sys/module/fuse/parameters/enable_uring", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var byte: UInt8 = 0
        return read(fd, &byte, 1) == 1 && byte == UInt8(ascii: "Y")
    }
}
