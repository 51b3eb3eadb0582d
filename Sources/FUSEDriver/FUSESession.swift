import CFuse
import CSodium
import Glibc
import SystemCalls
import SystemPackage

/// Mounts a FileSystem with libfuse's low-level API and serves it on this thread until it is
/// unmounted or the process is signalled (libfuse's SIGINT/SIGTERM/SIGHUP handlers end the loop).
package enum FUSESession {
    package struct MountFailure: Error {
        package let message: String
    }

    /// 200 µs: longer than the gap between one request's answer and the next request of a
    /// program working the mount (a wake-up of an idle CPU alone is tens of µs on this VM), so
    /// a busy program's requests are picked up without one; see docs/performance.md.
    package static let defaultBusyPollMicroseconds = 200

    /// The largest READ the kernel sends. With direct I/O it pins the reader's whole buffer
    /// for each READ before sending it: `cat` reads into 128 KiB, 32 pages faulted in and
    /// pinned to receive a 64-byte secret. 16 KiB pins 4 and still takes most secrets (keys,
    /// certificates) in one READ; a 1 MiB item takes 64 instead of 8 (see docs/performance.md).
    static let maximumRead: UInt32 = 16384

    /// `source`: what the mount table names as the mount's source (the vault, for `findmnt -S`).
    /// `kernelOptions`: mount flags asked for through mount(8) (ro, noexec), passed to the kernel.
    /// `busyPollMicroseconds`: how long the loop polls for the next request before it sleeps.
    /// `transport`: /dev/fuse, io_uring (refused when the kernel does not offer it), or
    /// whichever the kernel offers.
    package static func serve(_ fileSystem: FileSystem, at mountpoint: String, source: String = "keychainfs", kernelOptions: [String] = [],
                      busyPollMicroseconds: Int = defaultBusyPollMicroseconds, transport: FUSETransport = .devFuse) throws(MountFailure) {
        let ring = fileSystem.ring
        let wantsRing: Bool
        switch transport {
        case .devFuse:
            wantsRing = false
        case .ioUring:
            guard FUSETransport.kernelOffersIoUring else {
                throw MountFailure(message: "the kernel does not offer FUSE over io_uring (/sys/module/fuse/parameters/enable_uring is not Y); use --transport dev-fuse or auto")
            }
            guard ring.create() else {
                throw MountFailure(message: "cannot set up an io_uring for FUSE (io_uring may be disabled: /proc/sys/kernel/io_uring_disabled)")
            }
            wantsRing = true
        case .auto:
            wantsRing = FUSETransport.kernelOffersIoUring && ring.create()
        }
        fileSystem.initNegotiation.wantsIoUring.store(wantsRing, ordering: .sequentiallyConsistent)
        var ops = FUSEOperations.table()
        // Only the mounting user can reach the mount (no allow_other); the kernel checks modes.
        let arguments = ["keychainfs", "-o", (["fsname=\(optionValue(source)),subtype=keychainfs,default_permissions,noatime,max_read=\(maximumRead)"]
                                              + kernelOptions).joined(separator: ",")]
        // libfuse may keep the vector and its strings: both live for the whole process.
        let argv = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: arguments.count + 1)
        for (index, argument) in arguments.enumerated() { argv[index] = strdup(argument) }
        argv[arguments.count] = nil
        var args = cfuse_args_init(Int32(arguments.count), argv)
        defer { fuse_opt_free_args(&args) }

        let userdata = Unmanaged.passRetained(fileSystem).toOpaque()
        defer { Unmanaged<FileSystem>.fromOpaque(userdata).release() }
        guard let session = cfuse_session_new(&args, &ops, MemoryLayout<fuse_lowlevel_ops>.size, userdata) else {
            throw MountFailure(message: "cannot start a FUSE session")
        }
        var destroyable = true
        defer { if destroyable { fuse_session_destroy(session) } }
        // libfuse only takes over signals still at their default; a daemon started from a
        // script's background job inherits SIGINT ignored, and a parent may have blocked some.
        var endingSignals = sigset_t()
        sigemptyset(&endingSignals)
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            Glibc.signal(signal, SIG_DFL)
            sigaddset(&endingSignals, signal)
        }
        sigprocmask(SIG_UNBLOCK, &endingSignals, nil)
        guard fuse_set_signal_handlers(session) == 0 else {
            throw MountFailure(message: "cannot install signal handlers")
        }
        defer { fuse_remove_signal_handlers(session) }
        guard fuse_session_mount(session, mountpoint) == 0 else {
            throw MountFailure(message: "cannot mount on \(mountpoint): /dev/fuse is missing or unusable, or the mount was refused")
        }
        defer { fuse_session_unmount(session) }
        // Before the unmount, which waits for every request the ring holds: with the loop over,
        // only the ring's end (the kernel cancels what waits in it) lets them go.
        defer { ring.close() }
        // Should libfuse refuse, shared mappings fail with ENODEV, io_uring is not asked for,
        // and all else works.
        if !InitNegotiation.install(on: session) {
            fileSystem.initNegotiation.wantsIoUring.store(false, ordering: .sequentiallyConsistent)
        }
        fileSystem.attach(session: session)
        defer { destroyable = fileSystem.detachSession() }
        runLoop(session, fileSystem, busyPoll: Int64(busyPollMicroseconds) * 1000)
    }

    /// A value inside libfuse's `-o` list, which splits at commas and takes a backslash as an
    /// escape (fusermount3 reads the list it is handed the same way); the kernel escapes what
    /// /proc/mounts needs (space, tab, newline, backslash) itself.
    static func optionValue(_ value: String) -> String {
        var escaped = ""
        for character in value {
            if character == "," || character == "\\" { escaped.append("\\") }
            escaped.append(character)
        }
        return escaped
    }

    /// Our own loop over receive/process so that every request buffer is wiped once served:
    /// a write's payload and new names arrive in it as plaintext. After answering, it keeps
    /// asking for the next request (non-blocking reads) for up to `busyPoll` nanoseconds before
    /// it sleeps in poll(2): a request that comes meanwhile is served without waking this
    /// thread, which on this machine costs as much as serving it. Short plaintext left on
    /// this thread's stack is wiped when it goes idle, or when a lock asks (SessionStackWipe).
    /// Once INIT's reply has asked for io_uring, the loop goes on over the ring (`FUSERing`).
    private static func runLoop(_ session: OpaquePointer, _ fileSystem: FileSystem, busyPoll: Int64) {
        var buffer = fuse_buf()
        var largest = 0
        let fd = fuse_session_fd(session)
        let polling = busyPoll > 0 && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0
        var idleSince: Int64? = nil
        let stack = fileSystem.sessionStack
        let negotiation = fileSystem.initNegotiation
        stack.started()
        defer { stack.ended() }
        defer {
            if let memory = buffer.mem {
                sodium_memzero(memory, largest)
                free(memory)
            }
        }
        while fuse_session_exited(session) == 0 {
            if negotiation.ioUringAccepted.load(ordering: .sequentiallyConsistent) {
                let payload = negotiation.ringPayloadSize.load(ordering: .sequentiallyConsistent)
                if fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0,
                   fileSystem.ring.start(fuseFD: fd, payloadSize: payload) {
                    fileSystem.ring.serve(session, fileSystem, busyPoll: busyPoll) { session in
                        serveDevice(session, fileSystem, &buffer, &largest)
                    }
                    return
                }
                // The kernel went back to /dev/fuse (a registration it refused).
                negotiation.ioUringAccepted.store(false, ordering: .sequentiallyConsistent)
                if !polling { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) }
            }
            if !polling { stack.willWait() }
            let received = fuse_session_receive_buf(session, &buffer)
            if !polling { stack.woke() }
            let failure = received < 0 ? Errno(negatedReturn: received) : nil
            if failure == .interrupted { continue }
            if polling && failure == .resourceTemporarilyUnavailable {
                let now = FileSystem.monotonicNanoseconds()
                let since = idleSince ?? now
                idleSince = since
                if now - since < busyPoll { continue }
                // Nothing came: sleep until something does (or a signal ends the loop).
                stack.willWait()
                var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&ready, 1, -1)
                stack.woke()
                idleSince = nil
                continue
            }
            idleSince = nil
            if received <= 0 { break }
            largest = max(largest, Int(received))
            fileSystem.noteActivity()
            fuse_session_process_buf(session, &buffer)
            if let memory = buffer.mem { sodium_memzero(memory, Int(received)) }
            stack.afterRequest()
        }
    }

    /// With the ring: serves what /dev/fuse holds (non-blocking); false once it is gone.
    private static func serveDevice(_ session: OpaquePointer, _ fileSystem: FileSystem, _ buffer: inout fuse_buf,
                                    _ largest: inout Int) -> Bool {
        while fuse_session_exited(session) == 0 {
            let received = fuse_session_receive_buf(session, &buffer)
            let failure = received < 0 ? Errno(negatedReturn: received) : nil
            if failure == .interrupted { continue }
            if failure == .resourceTemporarilyUnavailable { return true }
            if received <= 0 { return false }
            largest = max(largest, Int(received))
            fileSystem.noteActivity()
            fuse_session_process_buf(session, &buffer)
            if let memory = buffer.mem { sodium_memzero(memory, Int(received)) }
            fileSystem.sessionStack.afterRequest()
        }
        return false
    }
}
