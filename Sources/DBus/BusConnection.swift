import CSystemd
import Glibc
import Locking
import Support
import Synchronization
import SystemCalls
import SystemPackage

/// One connection to a message bus, driven by exactly one thread (sd-bus is not
/// thread-safe): the thread that calls run(). Setting up (requestName, serve, the callbacks)
/// happens before run() on any one thread; post() and stop() are for other threads.
///
/// No sd-bus vtables: every method call to a served path prefix reaches one handler, which
/// answers the standard interfaces (Properties, Introspectable) itself. sd-bus answers only
/// org.freedesktop.DBus.Peer.
package final class BusConnection: @unchecked Sendable {
    package enum Ended: Equatable, Sendable {
        case stopped
        case nameLost
        case disconnected
    }

    package let uniqueName: String
    /// Called on the loop thread with the unique name of a peer that left the bus.
    package var onPeerVanished: ((String) -> Void)?
    /// Called on the loop thread when another connection takes our well-known name; run()
    /// then returns .nameLost.
    package var onNameLost: (() -> Void)?

    private let bus: OpaquePointer
    /// Wakes the loop's poll for posted work and stop().
    private let wakeDescriptor: Int32
    private let shared = OrderedMutex(.busShared, Shared())
    private var ownedNames: Set<String> = []
    private var nameLost = false
    /// Handlers stay alive here; sd-bus holds them unretained as userdata.
    private var handlers: [Handler] = []
    private var signalHandlers: [SignalHandler] = []

    private struct Shared {
        package var work: [@Sendable () -> Void] = []
        package var stopRequested = false
        package var loopThread: pthread_t?
    }

    private final class Handler {
        package unowned let connection: BusConnection
        package let serve: (BusCall) -> Void
        package init(connection: BusConnection, serve: @escaping (BusCall) -> Void) {
            self.connection = connection
            self.serve = serve
        }
    }

    private final class SignalHandler {
        package let handle: (String, inout BusReader) throws(BusError) -> Void
        package init(_ handle: @escaping (String, inout BusReader) throws(BusError) -> Void) { self.handle = handle }
    }

    /// Holds a reference to a received message for as long as a reader of it lives.
    private final class HeldReference {
        package let message: OpaquePointer
        package init(_ message: OpaquePointer) { self.message = sd_bus_message_ref(message) }
        deinit { sd_bus_message_unref(message) }
    }

    private init(bus: OpaquePointer, uniqueName: String, wakeDescriptor: Int32) {
        self.bus = bus
        self.uniqueName = uniqueName
        self.wakeDescriptor = wakeDescriptor
    }

    deinit {
        // Nothing drives the bus any more: work still queued (replies, message releases)
        // runs here rather than leaking.
        let pending = shared.withLock { state in
            defer { state.work = [] }
            return state.work
        }
        for work in pending { work() }
        sd_bus_flush_close_unref(bus)
        close(wakeDescriptor)
    }

    /// Connects to the session bus named by DBUS_SESSION_BUS_ADDRESS.
    package static func session() throws(BusError) -> BusConnection {
        guard let address = getenv("DBUS_SESSION_BUS_ADDRESS").map({ String(cString: $0) }), !address.isEmpty else {
            throw .connection("no session bus: DBUS_SESSION_BUS_ADDRESS is not set")
        }
        return try connect(address: address)
    }

    /// Connects to the system bus: DBUS_SYSTEM_BUS_ADDRESS, else the standard socket.
    package static func system() throws(BusError) -> BusConnection {
        let named = getenv("DBUS_SYSTEM_BUS_ADDRESS").map { String(cString: $0) } ?? ""
        return try connect(address: named.isEmpty ? "unix:path=/run/dbus/system_bus_socket" : named, called: "system bus")
    }

    /// Connects to the bus at `address` (a D-Bus address such as unix:path=/run/user/1000/bus);
    /// `called` is what errors call it.
    package static func connect(address: String, called busName: String = "session bus") throws(BusError) -> BusConnection {
        var created: OpaquePointer?
        var rc = sd_bus_new(&created)
        guard rc >= 0, let bus = created else { throw .connection("cannot create a D-Bus connection: \(errorText(rc))") }
        rc = sd_bus_set_address(bus, address)
        if rc >= 0 { rc = sd_bus_set_bus_client(bus, 1) }
        if rc >= 0 { rc = sd_bus_set_description(bus, "keychainfs") }
        guard rc >= 0 else {
            sd_bus_unref(bus)
            throw .connection("the \(busName) address \(address) is not usable: \(errorText(rc))")
        }
        rc = sd_bus_start(bus)
        var name: UnsafePointer<CChar>?
        // The unique name arrives with the reply to Hello: waiting for it proves the bus took us.
        if rc >= 0 { rc = sd_bus_get_unique_name(bus, &name) }
        guard rc >= 0, let name else {
            sd_bus_flush_close_unref(bus)
            throw .connection("cannot connect to the \(busName) at \(address): \(errorText(rc))")
        }
        let wake: Int32
        do {
            wake = try SystemCall.once { eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK)) }
        } catch {
            sd_bus_flush_close_unref(bus)
            throw .connection("cannot create an eventfd for the D-Bus loop: \(error)")
        }
        let connection = BusConnection(bus: bus, uniqueName: String(cString: name), wakeDescriptor: wake)
        try connection.watchBusSignals()
        return connection
    }

    /// Match rules for the two signals the layer itself handles: peers leaving and our own
    /// names being taken away.
    private func watchBusSignals() throws(BusError) {
        let me = Unmanaged.passUnretained(self).toOpaque()
        let daemon = "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',interface='org.freedesktop.DBus',"
        var rc = sd_bus_add_match(bus, nil, daemon + "member='NameOwnerChanged',arg2=''", { message, userdata, _ in
            guard let message, let userdata else { return 0 }
            let connection = Unmanaged<BusConnection>.fromOpaque(userdata).takeUnretainedValue()
            var name: UnsafePointer<CChar>?
            guard sd_bus_message_read_basic(message, BusReader.code("s"), &name) > 0, let name else { return 0 }
            let peer = String(cString: name)
            // Well-known names change hands without anyone leaving; only a unique name's end
            // means a peer has gone.
            if peer.hasPrefix(":") { connection.onPeerVanished?(peer) }
            return 0
        }, me)
        if rc >= 0 {
            rc = sd_bus_add_match(bus, nil, daemon + "member='NameLost'", { message, userdata, _ in
                guard let message, let userdata else { return 0 }
                let connection = Unmanaged<BusConnection>.fromOpaque(userdata).takeUnretainedValue()
                var name: UnsafePointer<CChar>?
                guard sd_bus_message_read_basic(message, BusReader.code("s"), &name) > 0, let name else { return 0 }
                connection.lost(String(cString: name))
                return 0
            }, me)
        }
        guard rc >= 0 else { throw .connection("cannot watch the session bus for departing peers: \(BusConnection.errorText(rc))") }
    }

    private func lost(_ name: String) {
        guard ownedNames.remove(name) != nil else { return }
        nameLost = true
        onNameLost?()
    }

    /// Requests a well-known name, always allowing others to replace us (so that a later
    /// `--replace` can take it). With `replace`, takes it from an owner that allows that.
    /// Owned by another and not taken: throws a `nameTaken` error naming the owner's process.
    package func requestName(_ name: String, replace: Bool) throws(BusError) {
        var flags = UInt64(SD_BUS_NAME_ALLOW_REPLACEMENT)
        if replace { flags |= UInt64(SD_BUS_NAME_REPLACE_EXISTING) }
        let rc = sd_bus_request_name(bus, name, flags)
        if rc == -EEXIST { throw .nameTaken("\(name) is already owned by \(owner(of: name))") }
        guard rc >= 0 else { throw .connection("cannot request the name \(name) on the session bus: \(BusConnection.errorText(rc))") }
        ownedNames.insert(name)
    }

    /// "pid N (COMM)" of a name's owner as the bus daemon reports it; the owner may leave
    /// meanwhile, or hide its process, and then it is only "another process".
    private func owner(of name: String) -> String {
        var creds: OpaquePointer?
        guard sd_bus_get_name_creds(bus, name, UInt64(SD_BUS_CREDS_PID), &creds) >= 0, let creds else { return "another process" }
        defer { sd_bus_creds_unref(creds) }
        var pid: pid_t = 0
        guard sd_bus_creds_get_pid(creds, &pid) >= 0, pid > 0 else { return "another process" }
        guard let comm = BusConnection.command(of: pid) else { return "pid \(pid)" }
        return "pid \(pid) (\(comm))"
    }

    private static func command(of pid: pid_t) -> String? {
        guard let bytes = try? FileDescriptor.contents(of: "/proc/\(pid)/comm"), !bytes.isEmpty else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        return text.hasSuffix("\n") ? String(text.dropLast()) : text
    }

    /// Every method call to `path` or below it goes to `handler`, on the loop thread.
    package func serve(prefix path: String, _ handler: @escaping (BusCall) -> Void) throws(BusError) {
        let box = Handler(connection: self, serve: handler)
        // A fallback also receives calls to the prefix path itself.
        let rc = sd_bus_add_fallback(bus, nil, path, { message, userdata, _ in
            guard let message, let userdata else { return 0 }
            // First of all, so that sd-bus wipes the message's memory when it frees it.
            sd_bus_message_sensitive(message)
            let box = Unmanaged<Handler>.fromOpaque(userdata).takeUnretainedValue()
            box.serve(BusCall(message: message, connection: box.connection))
            return 1
        }, Unmanaged.passUnretained(box).toOpaque())
        guard rc >= 0 else { throw .connection("cannot serve D-Bus objects under \(path): \(BusConnection.errorText(rc))") }
        handlers.append(box)
    }

    /// Runs on the calling thread until stop(), the loss of our name, or the end of the
    /// connection. Dispatches calls, runs posted work, and calls `tick` about every
    /// `tickInterval`.
    @discardableResult
    package func run(tickInterval: Duration, tick: () -> Void) -> Ended {
        shared.withLock { $0.loopThread = pthread_self() }
        defer {
            shared.withLock { state in
                state.loopThread = nil
                state.stopRequested = false
            }
        }
        let clock = ContinuousClock()
        var nextTick = clock.now + tickInterval
        // Whether calls, posted work or a tick ran since this thread's stack was last wiped.
        var served = false
        while true {
            if runPosted() { served = true }
            if shared.withLock({ $0.stopRequested }) { return .stopped }
            if nameLost {
                nameLost = false
                return .nameLost
            }
            let processed = sd_bus_process(bus, nil)
            guard processed >= 0, sd_bus_is_open(bus) > 0 else { return .disconnected }
            if clock.now >= nextTick {
                tick()
                nextTick = clock.now + tickInterval
                served = true
            }
            // sd-bus handles one message per call: poll only once it has nothing left.
            if processed > 0 {
                served = true
                continue
            }
            // Secrets, labels and names answered or compared here stay in dead frames.
            if served {
                StackWipe.here()
                served = false
            }
            guard wait(until: nextTick, clock: clock) else { return .disconnected }
        }
    }

    /// Waits for the bus, a wake-up or the next tick; false if the bus cannot be waited on.
    private func wait(until nextTick: ContinuousClock.Instant, clock: ContinuousClock) -> Bool {
        let fd = sd_bus_get_fd(bus)
        let events = sd_bus_get_events(bus)
        var busTimeout: UInt64 = 0
        guard fd >= 0, events >= 0, sd_bus_get_timeout(bus, &busTimeout) >= 0 else { return false }
        var milliseconds = BusConnection.milliseconds(nextTick - clock.now)
        if busTimeout != UInt64.max {
            // sd-bus gives an absolute CLOCK_MONOTONIC time in microseconds (0: now).
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let nowMicroseconds = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
            let remaining = busTimeout > nowMicroseconds ? (busTimeout - nowMicroseconds + 999) / 1000 : 0
            milliseconds = min(milliseconds, Int32(clamping: remaining))
        }
        var descriptors = [
            pollfd(fd: fd, events: Int16(events), revents: 0),
            pollfd(fd: wakeDescriptor, events: Int16(POLLIN), revents: 0),
        ]
        do {
            _ = try SystemCall.poll(&descriptors, within: milliseconds < 0 ? nil : .milliseconds(milliseconds))
        } catch {
            return false
        }
        if descriptors[1].revents & Int16(POLLIN) != 0 {
            var count: UInt64 = 0
            _ = read(wakeDescriptor, &count, MemoryLayout<UInt64>.size)
        }
        return true
    }

    private static func milliseconds(_ duration: Duration) -> Int32 {
        guard duration > .zero else { return 0 }
        let (seconds, attoseconds) = duration.components
        // Rounded up, so that a tick is never polled for just before it is due.
        return Int32(clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    }

    /// Whether there was any.
    private func runPosted() -> Bool {
        let work = shared.withLock { state in
            defer { state.work = [] }
            return state.work
        }
        for item in work { item() }
        return !work.isEmpty
    }

    /// From any thread: runs `work` on the loop thread soon.
    package func post(_ work: @escaping @Sendable () -> Void) {
        shared.withLock { $0.work.append(work) }
        wake()
    }

    /// From any thread: makes run() return .stopped (at once if it has not started yet).
    package func stop() {
        shared.withLock { $0.stopRequested = true }
        wake()
    }

    private func wake() {
        var one: UInt64 = 1
        _ = write(wakeDescriptor, &one, MemoryLayout<UInt64>.size)
    }

    /// Whether the calling thread may use the bus: it runs the loop, or no loop runs.
    package var isLoopThread: Bool {
        shared.withLock { state in state.loopThread.map { pthread_equal($0, pthread_self()) != 0 } ?? true }
    }

    /// Runs `work` now if the calling thread may use the bus, else posts it.
    package func onLoopThread(_ work: @escaping @Sendable () -> Void) {
        if isLoopThread { work() } else { post(work) }
    }

    /// Loop thread only. Sends a signal from `path`.
    package func emitSignal(path: String, interface: String, member: String,
                    _ body: (inout BusWriter) throws(BusError) -> Void) throws(BusError) {
        precondition(isLoopThread, "a D-Bus signal sent off the loop thread")
        var created: OpaquePointer?
        let rc = sd_bus_message_new_signal(bus, &created, path, interface, member)
        guard rc >= 0, let signal = created else {
            throw .failed("cannot create the signal \(interface).\(member) on \(path): \(BusConnection.errorText(rc))")
        }
        defer { sd_bus_message_unref(signal) }
        sd_bus_message_sensitive(signal)
        var writer = BusWriter(message: signal)
        try body(&writer)
        let sent = sd_bus_send(bus, signal, nil)
        guard sent >= 0 else { throw .failed("cannot send the signal \(interface).\(member): \(BusConnection.errorText(sent))") }
    }

    /// Loop thread only: a peer's process id and effective uid as the bus daemon knows them
    /// (GetConnectionCredentials), never what a message claims.
    package func credentials(of peer: String) throws(BusError) -> (pid: pid_t, uid: uid_t) {
        precondition(isLoopThread, "D-Bus credentials asked off the loop thread")
        var created: OpaquePointer?
        let rc = sd_bus_get_name_creds(bus, peer, UInt64(SD_BUS_CREDS_PID) | UInt64(SD_BUS_CREDS_EUID), &created)
        guard rc >= 0, let creds = created else {
            throw .failed("the bus does not know the process of \(peer): \(BusConnection.errorText(rc))")
        }
        defer { sd_bus_creds_unref(creds) }
        var pid: pid_t = 0
        var uid: uid_t = 0
        guard sd_bus_creds_get_pid(creds, &pid) >= 0, sd_bus_creds_get_euid(creds, &uid) >= 0 else {
            throw .failed("the bus did not tell the process id and user of \(peer)")
        }
        return (pid, uid)
    }

    /// Before run(), or on the loop thread: calls `handler` on the loop thread with the body of
    /// every signal that matches (nil: any sender or path), given the signal's object path and
    /// a reader of its body. A handler's error is dropped: a signal of the wrong shape is no
    /// one's to answer.
    package func onSignal(sender: String?, path: String?, interface: String, member: String,
                  _ handler: @escaping (_ path: String, _ body: inout BusReader) throws(BusError) -> Void) throws(BusError) {
        precondition(isLoopThread, "a D-Bus match added off the loop thread")
        let box = SignalHandler(handler)
        let rc = sd_bus_match_signal(bus, nil, sender, path, interface, member, { message, userdata, _ in
            guard let message, let userdata else { return 0 }
            let box = Unmanaged<SignalHandler>.fromOpaque(userdata).takeUnretainedValue()
            let path = sd_bus_message_get_path(message).map { String(cString: $0) } ?? ""
            var reader = BusReader(message: message, owner: HeldReference(message))
            try? box.handle(path, &reader)
            return 0
        }, Unmanaged.passUnretained(box).toOpaque())
        guard rc >= 0 else { throw .connection("cannot watch for the signal \(interface).\(member): \(BusConnection.errorText(rc))") }
        signalHandlers.append(box)
    }

    /// Before run(), or on the loop thread: calls a method and waits for its reply (at most
    /// `timeout`); the reply's body, or the error it carries.
    package func call(destination: String, path: String, interface: String, member: String, timeout: Duration = .seconds(10),
              _ body: (inout BusWriter) throws(BusError) -> Void = { _ in }) throws(BusError) -> BusReader {
        precondition(isLoopThread, "a D-Bus call made off the loop thread")
        var created: OpaquePointer?
        var rc = sd_bus_message_new_method_call(bus, &created, destination, path, interface, member)
        guard rc >= 0, let call = created else {
            throw .failed("cannot create the call \(interface).\(member): \(BusConnection.errorText(rc))")
        }
        defer { sd_bus_message_unref(call) }
        var writer = BusWriter(message: call)
        try body(&writer)
        var error = sd_bus_error(name: nil, message: nil, _need_free: 0)
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        let microseconds = UInt64(timeout.components.seconds) * 1_000_000
        rc = sd_bus_call(bus, call, microseconds, &error, &reply)
        guard rc >= 0, let reply else {
            if let name = error.name {
                throw BusError(name: String(cString: name), message: error.message.map { String(cString: $0) } ?? "")
            }
            throw .failed("\(destination) did not answer \(interface).\(member): \(BusConnection.errorText(rc))")
        }
        // A reply may carry secrets (a Secret Service's GetSecret): sd-bus wipes it when freed.
        sd_bus_message_sensitive(reply)
        let held = HeldReference(reply)
        sd_bus_message_unref(reply)
        return BusReader(message: held.message, owner: held)
    }

    /// Before run(), or on the loop thread, for a client waiting on a signal (a Secret Service
    /// prompt's Completed): dispatches what arrives, signal handlers included, until `done()`
    /// holds or `timeout` passes; whether it held.
    package func process(until done: () -> Bool, timeout: Duration) throws(BusError) -> Bool {
        precondition(isLoopThread, "a D-Bus connection driven off the loop thread")
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while !done() {
            let processed = sd_bus_process(bus, nil)
            guard processed >= 0 else { throw .connection("the bus connection failed: \(BusConnection.errorText(processed))") }
            if processed > 0 { continue }
            let remaining = deadline - clock.now
            guard remaining > .zero else { return false }
            let (seconds, attoseconds) = remaining.components
            let waited = sd_bus_wait(bus, UInt64(seconds) * 1_000_000 + UInt64(attoseconds / 1_000_000_000_000) + 1)
            guard waited >= 0 || waited == -EINTR else { throw .connection("the bus connection failed: \(BusConnection.errorText(waited))") }
        }
        return true
    }

    /// sd-bus returns negative errno values.
    package static func errorText(_ rc: Int32) -> String {
        Errno(negatedReturn: rc).description
    }
}
