import CFuse
import CLinux
import Glibc
import Synchronization

/// What INIT must say that libfuse 3.14 cannot: FUSE_DIRECT_IO_ALLOW_MMAP (Linux 6.6: shared
/// mmap of files opened with direct I/O) and FUSE_OVER_IO_URING (Linux 6.14: requests through
/// io_uring queues, when the mount asks for it). So the session reads and writes /dev/fuse
/// through libfuse's custom I/O: the read notes what an INIT offers, and the write of that
/// INIT's reply adds what we want of it. Without the offer (an older kernel, enable_uring off)
/// nothing changes: a shared mapping fails with ENODEV as before, requests come by /dev/fuse.
/// The same write hands an answer to a request that came through io_uring to its ring entry.
final class InitNegotiation: Sendable {
    /// The unique id of an INIT offering either flag, until its reply goes; otherwise 0,
    /// which no request carries (only notices to the kernel do).
    private let initOffering = Atomic<UInt64>(0)
    /// That INIT's flags2, as offered.
    private let offered = Atomic<UInt32>(0)
    /// Set before mounting: ask for io_uring queues if the kernel offers them.
    let wantsIoUring = Atomic<Bool>(false)
    /// The INIT reply asked for io_uring queues: the kernel holds every request until the
    /// queues are registered (`FUSERing.start`), or one registration fails.
    let ioUringAccepted = Atomic<Bool>(false)
    /// The largest request or answer payload the kernel may put in a ring entry, from the
    /// INIT reply: the larger of max_write and max_pages pages (and at least 8 KiB).
    let ringPayloadSize = Atomic<Int>(0)

    private static let headerSize = MemoryLayout<fuse_in_header>.size
    private static let replyHeaderSize = MemoryLayout<fuse_out_header>.size
    private static let mmapFlag2 = UInt32(truncatingIfNeeded: FUSE_DIRECT_IO_ALLOW_MMAP >> 32)
    private static let uringFlag2 = UInt32(truncatingIfNeeded: FUSE_OVER_IO_URING >> 32)

    /// After `fuse_session_mount`, on the descriptor it opened; false if libfuse refused.
    static func install(on session: OpaquePointer) -> Bool {
        var io = fuse_custom_io()
        io.read = { fd, buffer, length, userdata in
            let received = Glibc.read(fd, buffer, length)
            if received > 0, let buffer, let userdata {
                InitNegotiation.fileSystem(userdata).initNegotiation.noteRequest(UnsafeRawBufferPointer(start: buffer, count: received))
            }
            return received
        }
        io.writev = { fd, vector, count, userdata in
            guard let vector, let userdata else { return Glibc.writev(fd, vector, count) }
            let fs = InitNegotiation.fileSystem(userdata)
            // An answer to a request that came through a ring entry goes back through it.
            if let answered = fs.ring.answer(vector, Int(count)) { return answered }
            fs.initNegotiation.amendReply(vector, Int(count))
            return Glibc.writev(fd, vector, count)
        }
        return fuse_session_custom_io(session, &io, fuse_session_fd(session)) == 0
    }

    /// libfuse hands its session's userdata, the FileSystem, to the custom I/O as well.
    private static func fileSystem(_ userdata: UnsafeMutableRawPointer) -> FileSystem {
        Unmanaged<FileSystem>.fromOpaque(userdata).takeUnretainedValue()
    }

    private func noteRequest(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= Self.headerSize + MemoryLayout<fuse_init_in>.size else { return }
        let header = bytes.loadUnaligned(as: fuse_in_header.self)
        guard header.opcode == FUSE_INIT.rawValue else { return }
        let offer = bytes.loadUnaligned(fromByteOffset: Self.headerSize, as: fuse_init_in.self)
        guard offer.flags & UInt32(FUSE_INIT_EXT) != 0, offer.flags2 & (Self.mmapFlag2 | Self.uringFlag2) != 0 else { return }
        offered.store(offer.flags2, ordering: .sequentiallyConsistent)
        initOffering.store(header.unique, ordering: .sequentiallyConsistent)
    }

    /// The INIT reply is libfuse's header and `fuse_init_out`, in that order.
    private func amendReply(_ vector: UnsafeMutablePointer<iovec>, _ count: Int) {
        let unique = initOffering.load(ordering: .sequentiallyConsistent)
        guard unique != 0, count >= 2, vector[0].iov_len >= Self.replyHeaderSize,
              vector[1].iov_len >= MemoryLayout<fuse_init_out>.size,
              let header = vector[0].iov_base, let body = vector[1].iov_base else { return }
        let reply = header.loadUnaligned(as: fuse_out_header.self)
        guard reply.unique == unique else { return }
        initOffering.store(0, ordering: .sequentiallyConsistent)
        guard reply.error == 0 else { return }
        let offer = offered.load(ordering: .sequentiallyConsistent)
        var answer = body.loadUnaligned(as: fuse_init_out.self)
        // flags2 counts only with FUSE_INIT_EXT set in flags.
        answer.flags |= UInt32(FUSE_INIT_EXT)
        answer.flags2 |= offer & Self.mmapFlag2
        if offer & Self.uringFlag2 != 0, wantsIoUring.load(ordering: .sequentiallyConsistent) {
            answer.flags2 |= Self.uringFlag2
            let pages = Int(answer.max_pages) * Int(sysconf(Int32(_SC_PAGESIZE)))
            ringPayloadSize.store(max(8192, Int(answer.max_write), pages), ordering: .sequentiallyConsistent)
            ioUringAccepted.store(true, ordering: .sequentiallyConsistent)
        }
        body.storeBytes(of: answer, as: fuse_init_out.self)
    }
}
