import CFuse
import CLinux
import CSodium
import CURing
import Glibc
import Locking
import Synchronization

/// FUSE over io_uring (Linux 6.14): the kernel hands each request to a ring entry, a header
/// buffer and a payload buffer registered once, and takes the answer from the same buffers when
/// the entry is committed, which fetches the next request in the same system call. One queue
/// per possible CPU (the kernel queues a request on its caller's CPU's queue and uses the ring
/// only once every queue has an entry), all served by the session thread, which stays the one
/// thread that answers requests and owns `FileSystem.state`, as on /dev/fuse. Forgets and
/// interrupts still come by /dev/fuse, and notices (invalidations) go by it: the loop polls it
/// through the same ring, by way of an epoll instance that watches it.
///
/// A daemon that dies ends its connection before its parent can see it dead, as on /dev/fuse,
/// where the device's last close, in exit, aborts the connection and a stat then answers
/// ENOTCONN. Over a ring that last close needs two things of the kernel's exit path
/// (io_uring_files_cancel, before the files are closed): it cancels the dying task's requests
/// only when the task has one on an io_uring file in flight, and then cancels its ring
/// commands (fuse_uring_cancel hands each waiting entry back, dropping its reference to the
/// device) but of its polls only those on io_uring files. So the ring keeps a poll on a second,
/// idle ring (`exitCanceller`) that makes exit cancel, and watches /dev/fuse through an epoll
/// instance (`deviceWatch`), which holds no reference to what it watches. Without them, the
/// entries and the poll keep the device open until the ring's own teardown, from a kernel
/// worker after the daemon was reaped; a stat meanwhile is queued on the live connection, then
/// ended with ECONNABORTED (DaemonLogTests.whatADeadDaemonLeftIsClearedAndSaid).
///
/// libfuse 3.14 knows nothing of this: a request is copied into one buffer laid out as a read
/// of /dev/fuse would give it and handed to `fuse_session_process_buf`, and the custom I/O's
/// writev hands its answer here (`answer`) instead of to /dev/fuse.
///
/// Plaintext: the entry's copy of a request is wiped as soon as it is copied out, the copy
/// once served, and an answer once the kernel has taken it. The ring is made with
/// DEFER_TASKRUN, so the kernel writes into the entries only inside this thread's
/// io_uring_enter: after the submit that commits an answer, either the entry already holds
/// the next request (its commit id is set again) or nothing touches it until the next
/// enter, and the answer is wiped at once.
///
/// Teardown (cf. libfuse 3.18.0-3.18.1, CVE-2026-33150 and CVE-2026-33179: an answer from
/// another thread that outlives the ring, and state read after it was freed): an answer from
/// another thread is copied into its entry under the ring's lock; closing takes that lock and
/// marks the ring closed first, so a later answer goes to /dev/fuse (where the kernel, the
/// request gone, refuses it) and never into a freed buffer. The buffers are unmapped only
/// after io_uring_queue_exit, once no kernel path can write into them.
final class FUSERing: @unchecked Sendable {
    /// Entries per queue. An entry stays held while its request waits to be answered from
    /// another thread (a close waiting for the group commit, a request for a confirmation
    /// dialog): with all of a queue's entries held, that CPU's next requests wait in the
    /// kernel for one (on /dev/fuse they would be read and wait in the daemon instead).
    static let depth = 8

    private struct Entry {
        let header: UnsafeMutablePointer<fuse_uring_req_header>
        let payload: UnsafeMutableRawPointer
        let vectors: UnsafeMutablePointer<iovec>
        let queue: UInt16
        /// What the kernel named the request being served, to commit its answer.
        var commitID: UInt64 = 0
        /// Bytes of the payload that may still hold an answer: wiped with the next request.
        var unwiped = 0
        /// Bytes of the payload ever used, wiped at the end.
        var used = 0
        var live = true
    }

    private struct Shared {
        /// Requests handed to libfuse and not answered yet, by unique id: their entries.
        var unanswered: [UInt64: Int] = [:]
        /// Entries whose answer is in their buffers, to be committed by the session thread.
        var answered: [(entry: Int, length: Int)] = []
        var closed = true
        var sessionThread: pthread_t? = nil
    }

    private static let pollTag = UInt64.max - 1
    private static let wakeTag = UInt64.max - 2
    private static let exitCancellerTag = UInt64.max - 4
    private static let inHeaderSize = MemoryLayout<fuse_in_header>.size
    private static let outHeaderSize = MemoryLayout<fuse_out_header>.size
    private static let opHeaderCapacity = 128
    private static let headerStride = 512

    private let shared = OrderedMutex(.fuseRing, Shared())
    /// Whether answers may belong to the ring: a load, so /dev/fuse answers pay nothing more.
    private let active = Atomic<Bool>(false)
    /// Whether the kernel takes requests through the ring (for `status`).
    private let serving = Atomic<Bool>(false)

    // Owned by the session thread, set up before `active` and torn down after it.
    private var ring = io_uring()
    private var created = false
    /// Never used: a poll on it makes the kernel cancel this task's ring commands at its exit
    /// (see the type's comment).
    private var exitCanceller = io_uring()
    private var exitCancellerCreated = false
    private var entries: UnsafeMutableBufferPointer<Entry> = .init(start: nil, count: 0)
    private var headers: UnsafeMutableRawPointer? = nil
    private var headersSize = 0
    private var payloads: UnsafeMutableRawPointer? = nil
    private var payloadsSize = 0
    private var payloadCapacity = 0
    private var request: UnsafeMutableRawPointer? = nil
    private var requestCapacity = 0
    private var requestUsed = 0
    private var fuseFD: Int32 = -1
    /// Watches /dev/fuse for the ring's poll (see the type's comment: why not /dev/fuse itself).
    private var deviceWatch: Int32 = -1
    private var wake: Int32 = -1
    private var wakeValue: UInt64 = 0
    private var ended = false

    init() {}

    /// Whether requests come through the ring now.
    var isServing: Bool { serving.load(ordering: .acquiring) }

    /// How many queues the kernel expects: one per possible CPU (/sys/devices/system/cpu/possible).
    static var queueCount: Int {
        let fd = open("/sys/devices/system/cpu/possible", O_RDONLY | O_CLOEXEC)
        if fd >= 0 {
            defer { Glibc.close(fd) }
            var bytes = [UInt8](repeating: 0, count: 256)
            let count = read(fd, &bytes, bytes.count)
            if count > 0 {
                // "0-3" or "0,2-5": the highest number named, plus one.
                let text = String(decoding: bytes[0..<count], as: UTF8.self)
                let highest = text.split(whereSeparator: { $0 == "," || $0 == "-" || $0 == "\n" }).compactMap { Int($0) }.max()
                if let highest { return highest + 1 }
            }
        }
        return max(1, Int(sysconf(Int32(_SC_NPROCESSORS_CONF))))
    }

    /// On the session thread, before the mount: the ring itself, so that INIT asks for
    /// io_uring only when there is one to serve it. Its submitter is this thread alone
    /// (SINGLE_ISSUER), which DEFER_TASKRUN needs.
    func create() -> Bool {
        let count = Self.queueCount * Self.depth + 3
        var size: UInt32 = 1
        while size < UInt32(count) { size <<= 1 }
        var parameters = io_uring_params()
        parameters.flags = UInt32(IORING_SETUP_SQE128 | IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN)
        parameters.cq_entries = size * 2
        created = io_uring_queue_init_params(size, &ring, &parameters) == 0
        if created {
            exitCancellerCreated = io_uring_queue_init(1, &exitCanceller, 0) == 0
            if !exitCancellerCreated {
                io_uring_queue_exit(&ring)
                created = false
            }
        }
        return created
    }

    /// On the session thread, once INIT's reply asked for io_uring: registers every entry.
    /// When that cannot be done, one registration the kernel refuses makes it go back to
    /// /dev/fuse (it holds every request until the ring is ready or a registration fails).
    func start(fuseFD fd: Int32, payloadSize: Int) -> Bool {
        guard created else { return false }
        fuseFD = fd
        shared.withLock {
            $0.sessionThread = pthread_self()
            $0.closed = false
        }
        guard allocate(payloadSize: payloadSize) else {
            refuseRegistration()
            return false
        }
        for index in entries.indices {
            guard let sqe = io_uring_get_sqe(&ring) else { refuseRegistration(); return false }
            prepare(sqe, entry: index, command: FUSE_IO_URING_CMD_REGISTER)
        }
        armPoll(deviceWatch, tag: Self.pollTag)
        armPoll(wake, tag: Self.wakeTag)
        armPoll(exitCanceller.ring_fd, tag: Self.exitCancellerTag)
        active.store(true, ordering: .releasing)
        guard submit() else {
            active.store(false, ordering: .releasing)
            return false
        }
        serving.store(true, ordering: .releasing)
        return true
    }

    /// A registration whose iovec count is wrong: the kernel turns io_uring off for this
    /// connection and serves it by /dev/fuse.
    private func refuseRegistration() {
        guard let sqe = io_uring_get_sqe(&ring) else { return }
        memset(sqe, 0, 128)
        sqe.pointee.opcode = UInt8(IORING_OP_URING_CMD.rawValue)
        sqe.pointee.fd = fuseFD
        curing_sqe_set_cmd_op(sqe, FUSE_IO_URING_CMD_REGISTER.rawValue)
        sqe.pointee.user_data = Self.wakeTag - 1
        _ = io_uring_submit(&ring)
    }

    private func allocate(payloadSize: Int) -> Bool {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        payloadCapacity = (payloadSize + page - 1) / page * page
        let count = Self.queueCount * Self.depth
        headersSize = count * Self.headerStride
        payloadsSize = count * payloadCapacity
        requestCapacity = Self.inHeaderSize + Self.opHeaderCapacity + payloadCapacity
        wake = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        deviceWatch = epoll_create1(Int32(EPOLL_CLOEXEC))
        var watched = epoll_event()
        watched.events = EPOLLIN.rawValue
        guard wake >= 0, deviceWatch >= 0, epoll_ctl(deviceWatch, EPOLL_CTL_ADD, fuseFD, &watched) == 0 else { return false }
        guard let headers = map(headersSize), let payloads = map(payloadsSize), let request = map(requestCapacity) else {
            return false
        }
        self.headers = headers
        self.payloads = payloads
        self.request = request
        let vectors = UnsafeMutablePointer<iovec>.allocate(capacity: count * 2)
        let list = UnsafeMutableBufferPointer<Entry>.allocate(capacity: count)
        for index in 0..<count {
            let header = (headers + index * Self.headerStride).bindMemory(to: fuse_uring_req_header.self, capacity: 1)
            let payload = payloads + index * payloadCapacity
            vectors[2 * index] = iovec(iov_base: UnsafeMutableRawPointer(header), iov_len: MemoryLayout<fuse_uring_req_header>.size)
            vectors[2 * index + 1] = iovec(iov_base: payload, iov_len: payloadCapacity)
            list.initializeElement(at: index, to: Entry(header: header, payload: payload, vectors: vectors + 2 * index,
                                                        queue: UInt16(index / Self.depth)))
        }
        entries = list
        return true
    }

    /// Anonymous, never in a core dump; touched (and so backed) only as far as requests go.
    private func map(_ size: Int) -> UnsafeMutableRawPointer? {
        guard let memory = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0),
              memory != MAP_FAILED else { return nil }
        _ = madvise(memory, size, MADV_DONTDUMP)
        return memory
    }

    private func prepare(_ sqe: UnsafeMutablePointer<io_uring_sqe>, entry index: Int, command: fuse_uring_cmd) {
        memset(sqe, 0, 128)
        sqe.pointee.opcode = UInt8(IORING_OP_URING_CMD.rawValue)
        sqe.pointee.fd = fuseFD
        curing_sqe_set_cmd_op(sqe, command.rawValue)
        sqe.pointee.user_data = UInt64(index)
        if command == FUSE_IO_URING_CMD_REGISTER {
            sqe.pointee.addr = UInt64(UInt(bitPattern: entries[index].vectors))
            sqe.pointee.len = 2
        }
        let request = curing_sqe_cmd(sqe).assumingMemoryBound(to: fuse_uring_cmd_req.self)
        request.pointee.qid = entries[index].queue
        request.pointee.commit_id = command == FUSE_IO_URING_CMD_REGISTER ? 0 : entries[index].commitID
    }

    private func armPoll(_ fd: Int32, tag: UInt64) {
        guard let sqe = io_uring_get_sqe(&ring) else { return }
        memset(sqe, 0, 128)
        io_uring_prep_poll_add(sqe, fd, UInt32(POLLIN))
        sqe.pointee.user_data = tag
    }

    private func submit() -> Bool {
        while true {
            let submitted = io_uring_submit(&ring)
            if submitted >= 0 { return true }
            if submitted == -EINTR { continue }
            if submitted == -EBUSY || submitted == -EAGAIN { _ = io_uring_get_events(&ring); continue }
            return false
        }
    }

    /// From libfuse's writev, on any thread: puts the answer to a request that came through an
    /// entry into that entry, for the session thread to commit. Nil when the request did not
    /// come through the ring (or the ring is closed): the answer goes to /dev/fuse.
    func answer(_ vector: UnsafeMutablePointer<iovec>, _ count: Int) -> Int? {
        guard active.load(ordering: .acquiring), count >= 1, vector[0].iov_len >= Self.outHeaderSize,
              let base = vector[0].iov_base else { return nil }
        let out = base.loadUnaligned(as: fuse_out_header.self)
        var total = 0
        for index in 0..<count { total += vector[index].iov_len }
        let outcome = shared.withLock { state -> (written: Int, wakeSession: Bool)? in
            guard !state.closed, let index = state.unanswered.removeValue(forKey: out.unique) else { return nil }
            let entry = entries[index]
            var length = total - Self.outHeaderSize
            var error = out.error
            if length > payloadCapacity {
                length = 0
                error = -EIO
            } else {
                var offset = 0
                for part in 1..<max(1, count) {
                    guard let bytes = vector[part].iov_base else { continue }
                    memcpy(entry.payload + offset, bytes, vector[part].iov_len)
                    offset += vector[part].iov_len
                }
            }
            let header = UnsafeMutableRawPointer(entry.header)
            header.storeBytes(of: fuse_out_header(len: UInt32(Self.outHeaderSize + length), error: error, unique: out.unique),
                              as: fuse_out_header.self)
            // commit_id 0 marks "answered, not yet replaced": the kernel reads only payload_sz.
            entry.header.pointee.ring_ent_in_out = fuse_uring_ent_in_out(flags: 0, commit_id: 0, payload_sz: UInt32(length),
                                                                          padding: 0, reserved: 0)
            state.answered.append((index, length))
            let onSession = state.sessionThread.map { pthread_equal($0, pthread_self()) != 0 } ?? false
            return (total, !onSession)
        }
        guard let outcome else { return nil }
        if outcome.wakeSession {
            var one: UInt64 = 1
            _ = write(wake, &one, 8)
        }
        return outcome.written
    }

    /// The session loop over the ring, until unmount or a signal; also serves /dev/fuse (forgets,
    /// interrupts, and whatever the kernel sends there) when the ring's poll says it is ready.
    func serve(_ session: OpaquePointer, _ fileSystem: FileSystem, busyPoll: Int64, device: (OpaquePointer) -> Bool) {
        let stack = fileSystem.sessionStack
        var idleSince: Int64? = nil
        while fuse_session_exited(session) == 0 && !ended {
            var served = false
            var cqe: UnsafeMutablePointer<io_uring_cqe>? = nil
            while !ended, io_uring_peek_cqe(&ring, &cqe) == 0, let completion = cqe {
                let tag = completion.pointee.user_data, result = completion.pointee.res
                io_uring_cqe_seen(&ring, completion)
                handle(tag, result, session, fileSystem, device)
                served = true
            }
            commitAnswered()
            if ended { break }
            if served {
                idleSince = nil
                continue
            }
            let now = FileSystem.monotonicNanoseconds()
            if busyPoll > 0 {
                let since = idleSince ?? now
                idleSince = since
                if now - since < busyPoll {
                    // Runs the kernel's deferred work: requests that came meanwhile land now.
                    _ = io_uring_get_events(&ring)
                    continue
                }
            }
            // Nothing came: sleep until something does (or a signal ends the loop).
            stack.willWait()
            _ = io_uring_submit_and_wait(&ring, 1)
            stack.woke()
            idleSince = nil
        }
        serving.store(false, ordering: .releasing)
    }

    private func handle(_ tag: UInt64, _ result: Int32, _ session: OpaquePointer, _ fileSystem: FileSystem,
                        _ device: (OpaquePointer) -> Bool) {
        switch tag {
        case Self.pollTag:
            // /dev/fuse is readable (or gone: the read says so and the loop ends).
            if device(session) { armPoll(deviceWatch, tag: Self.pollTag) } else { ended = true }
        case Self.wakeTag:
            _ = read(wake, &wakeValue, 8)
            armPoll(wake, tag: Self.wakeTag)
        case let index where index < UInt64(entries.count):
            if result == 0 {
                serveEntry(Int(index), session, fileSystem)
            } else {
                // ENOTCONN: the connection ends (unmount). A refused registration leaves the
                // kernel serving by /dev/fuse, which the poll goes on reading.
                entries[Int(index)].live = false
                if !entries.contains(where: \.live) { serving.store(false, ordering: .releasing) }
            }
        default:
            break
        }
    }

    /// One request from an entry, laid out for libfuse as /dev/fuse gives it: the in header,
    /// the operation's header (the kernel's first argument), then the rest of the arguments.
    private func serveEntry(_ index: Int, _ session: OpaquePointer, _ fileSystem: FileSystem) {
        guard let request else { return }
        let entry = entries[index]
        let header = UnsafeMutableRawPointer(entry.header)
        let inHeader = header.loadUnaligned(as: fuse_in_header.self)
        let ringInOut = entry.header.pointee.ring_ent_in_out
        let payloadSize = Int(ringInOut.payload_sz)
        let opOffset = MemoryLayout<fuse_uring_req_header>.offset(of: \.op_in)!
        // The kernel's in.len counts every argument: what the payload does not hold is the
        // operation's header.
        let opSize = Int(inHeader.len) - Self.inHeaderSize - payloadSize
        guard opSize >= 0, opSize <= Self.opHeaderCapacity, payloadSize <= payloadCapacity else {
            sodium_memzero(entry.payload, min(payloadCapacity, max(payloadSize, entry.unwiped)))
            sodium_memzero(header + opOffset, Self.opHeaderCapacity)
            entries[index].commitID = ringInOut.commit_id
            entries[index].unwiped = 0
            header.storeBytes(of: fuse_out_header(len: UInt32(Self.outHeaderSize), error: -EIO, unique: inHeader.unique),
                              as: fuse_out_header.self)
            entry.header.pointee.ring_ent_in_out = fuse_uring_ent_in_out(flags: 0, commit_id: 0, payload_sz: 0, padding: 0, reserved: 0)
            shared.withLock { $0.answered.append((index, 0)) }
            return
        }
        let total = Self.inHeaderSize + opSize + payloadSize
        memcpy(request, header, Self.inHeaderSize)
        memcpy(request + Self.inHeaderSize, header + opOffset, opSize)
        memcpy(request + Self.inHeaderSize + opSize, entry.payload, payloadSize)
        // The entry's copy goes at once; the loop's copy once served.
        sodium_memzero(header + opOffset, opSize)
        sodium_memzero(entry.payload, max(payloadSize, entry.unwiped))
        entries[index].unwiped = 0
        entries[index].used = max(entry.used, payloadSize)
        entries[index].commitID = ringInOut.commit_id
        requestUsed = max(requestUsed, total)
        shared.withLock { $0.unanswered[inHeader.unique] = index }
        fileSystem.noteActivity()
        var buffer = fuse_buf()
        buffer.mem = request
        buffer.size = total
        fuse_session_process_buf(session, &buffer)
        sodium_memzero(request, total)
        fileSystem.sessionStack.afterRequest()
    }

    /// Commits the answers put in their entries (each fetches its entry's next request), then
    /// wipes each answer the kernel has taken and not already replaced with a request.
    private func commitAnswered() {
        let batch = shared.withLock { state in
            defer { state.answered.removeAll(keepingCapacity: true) }
            return state.answered
        }
        guard !batch.isEmpty else { return }
        for (index, _) in batch {
            // The ring has room for every entry and its three polls; should it be full, what waits goes first.
            var sqe = io_uring_get_sqe(&ring)
            if sqe == nil, submit() { sqe = io_uring_get_sqe(&ring) }
            guard let sqe else { continue }
            prepare(sqe, entry: index, command: FUSE_IO_URING_CMD_COMMIT_AND_FETCH)
        }
        _ = submit()
        for (index, length) in batch {
            let entry = entries[index]
            entries[index].used = max(entry.used, length)
            if entry.header.pointee.ring_ent_in_out.commit_id == 0 {
                sodium_memzero(entry.payload, length)
            } else {
                entries[index].unwiped = max(entry.unwiped, length)
            }
        }
    }

    /// On the session thread, after the loop: no answer reaches an entry from here on; the
    /// ring goes (the kernel cancels what waits in it), then the buffers, wiped.
    func close() {
        active.store(false, ordering: .releasing)
        serving.store(false, ordering: .releasing)
        shared.withLock { state in
            state.closed = true
            state.unanswered.removeAll()
            state.answered.removeAll()
        }
        if created {
            io_uring_queue_exit(&ring)
            created = false
        }
        if exitCancellerCreated {
            io_uring_queue_exit(&exitCanceller)
            exitCancellerCreated = false
        }
        for entry in entries {
            sodium_memzero(entry.payload, entry.used)
            sodium_memzero(UnsafeMutableRawPointer(entry.header), MemoryLayout<fuse_uring_req_header>.size)
        }
        if let request {
            sodium_memzero(request, requestUsed)
            munmap(request, requestCapacity)
        }
        if let headers { munmap(headers, headersSize) }
        if let payloads { munmap(payloads, payloadsSize) }
        if let base = entries.baseAddress {
            base.pointee.vectors.deallocate()
            entries.deallocate()
        }
        entries = .init(start: nil, count: 0)
        request = nil
        headers = nil
        payloads = nil
        if wake >= 0 { Glibc.close(wake) }
        wake = -1
        if deviceWatch >= 0 { Glibc.close(deviceWatch) }
        deviceWatch = -1
    }
}
