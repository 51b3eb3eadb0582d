import CFuse
import CLinux
import Glibc
import Synchronization

/// Shared mmap of files opened with direct I/O. The kernel (6.6 and later) allows it when the
/// INIT reply carries FUSE_DIRECT_IO_ALLOW_MMAP, a flag libfuse 3.14 neither knows nor passes
/// on. So the session reads and writes /dev/fuse through libfuse's custom I/O: the read notes
/// an INIT that offers the flag, and the write of that INIT's reply adds it. Without the offer
/// (an older kernel) nothing changes, and a shared mapping fails with ENODEV as before.
final class SharedMmapNegotiation: Sendable {
    /// The unique id of an INIT offering the flag, until its reply goes; otherwise 0, which
    /// no request carries (only notices to the kernel do).
    private let initOffering = Atomic<UInt64>(0)

    private static let headerSize = MemoryLayout<fuse_in_header>.size
    private static let replyHeaderSize = MemoryLayout<fuse_out_header>.size
    private static let flag2 = UInt32(truncatingIfNeeded: FUSE_DIRECT_IO_ALLOW_MMAP >> 32)

    /// After `fuse_session_mount`, on the descriptor it opened; false if libfuse refused.
    static func install(on session: OpaquePointer) -> Bool {
        var io = fuse_custom_io()
        io.read = { fd, buffer, length, userdata in
            let received = Glibc.read(fd, buffer, length)
            if received > 0, let buffer, let userdata {
                SharedMmapNegotiation.negotiation(userdata).noteRequest(UnsafeRawBufferPointer(start: buffer, count: received))
            }
            return received
        }
        io.writev = { fd, vector, count, userdata in
            if let vector, let userdata { SharedMmapNegotiation.negotiation(userdata).amendReply(vector, Int(count)) }
            return Glibc.writev(fd, vector, count)
        }
        return fuse_session_custom_io(session, &io, fuse_session_fd(session)) == 0
    }

    /// libfuse hands its session's userdata, the FileSystem, to the custom I/O as well.
    private static func negotiation(_ userdata: UnsafeMutableRawPointer) -> SharedMmapNegotiation {
        Unmanaged<FileSystem>.fromOpaque(userdata).takeUnretainedValue().sharedMmap
    }

    private func noteRequest(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= Self.headerSize + MemoryLayout<fuse_init_in>.size else { return }
        let header = bytes.loadUnaligned(as: fuse_in_header.self)
        guard header.opcode == FUSE_INIT.rawValue else { return }
        let offer = bytes.loadUnaligned(fromByteOffset: Self.headerSize, as: fuse_init_in.self)
        guard offer.flags & UInt32(FUSE_INIT_EXT) != 0, offer.flags2 & Self.flag2 != 0 else { return }
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
        var answer = body.loadUnaligned(as: fuse_init_out.self)
        // flags2 counts only with FUSE_INIT_EXT set in flags.
        answer.flags |= UInt32(FUSE_INIT_EXT)
        answer.flags2 |= Self.flag2
        body.storeBytes(of: answer, as: fuse_init_out.self)
    }
}
