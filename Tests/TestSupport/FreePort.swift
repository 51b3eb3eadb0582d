import Glibc

/// A port on 127.0.0.1 that nothing listens on now: the kernel's pick for a socket bound to port 0.
package func freeLocalPort() throws -> Int { try boundPort(0) }

/// A free port on 127.0.0.1 whose next port is free too (swtpm's TCTI finds the control channel there).
package func freeLocalPortPair() throws -> Int {
    for _ in 0..<50 {
        let port = try freeLocalPort()
        if port < 65535, (try? boundPort(port + 1)) != nil { return port }
    }
    throw FixtureError("no two free ports in a row on 127.0.0.1")
}

/// Binds a TCP socket to 127.0.0.1:`port` (0: the kernel picks), returns the port, closes it.
private func boundPort(_ port: Int) throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw FixtureError("socket: \(errno)") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
        }
    }
    guard bound else { throw FixtureError("bind: \(errno)") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Whether something accepts TCP connections on 127.0.0.1:`port` now.
package func acceptsConnections(port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}
