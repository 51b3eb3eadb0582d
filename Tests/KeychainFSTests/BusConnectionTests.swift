@testable import DBus
import Foundation
import Glibc
import Synchronization
import Testing
import VaultCore

/// A private bus and a connection of the test process on it, whose loop runs on a thread of
/// its own once started; stopped, and the bus with it, when the fixture goes.
final class BusLoopFixture {
    let bus: PrivateSessionBus
    let connection: BusConnection
    let ended = ThreadResult<BusConnection.Ended>()
    let loopThread = ThreadResult<pthread_t>()
    let ticks = Recorded<Void>()
    static let prefix = "/org/example/Test"

    init(serving handler: @escaping (BusCall) -> Void = { $0.replyError(.unknownMethod("nothing here")) }) throws {
        bus = try PrivateSessionBus()
        connection = try BusConnection.connect(address: bus.address)
        try connection.serve(prefix: BusLoopFixture.prefix, handler)
    }

    deinit {
        stop()
        bus.stop()
    }

    func start(tickInterval: Duration = .seconds(1)) {
        let connection = connection, ended = ended, loopThread = loopThread, ticks = ticks
        Thread {
            loopThread.set(pthread_self())
            ended.set(connection.run(tickInterval: tickInterval) { ticks.append(()) })
        }.start()
    }

    /// How the loop ended, once it has (nil if it did not within 10 s).
    func end() -> BusConnection.Ended? {
        _ = eventually { ended.value != nil }
        return ended.value
    }

    @discardableResult
    func stop() -> BusConnection.Ended? {
        guard loopThread.value != nil || ended.value != nil else { return nil }
        connection.stop()
        return end()
    }

    /// Runs a Python script as a client calling this connection.
    func python(_ script: String) throws -> [String] {
        try pythonBusClient(script, destination: connection.uniqueName, environment: bus.environment)
    }
}

/// Runs a Python script (after `pythonBusPrelude`) as a client of a bus, to completion, with
/// `destination` as its first argument; its lines of output.
func pythonBusClient(_ script: String, destination: String, environment: [String: String]) throws -> [String] {
    let result = try run("/usr/bin/python3", ["-c", pythonBusPrelude + script, destination], environment: environment)
    #expect(result.status == 0, "\(result.stderr)")
    return result.stdoutText.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
}

/// `call(path, member, signature, arguments)` calls the served connection (argv[1]) and
/// returns the reply, or prints "error NAME MESSAGE" and returns None.
let pythonBusPrelude = """
    import os, sys, dbus
    bus = dbus.SessionBus()
    def call(path, member, signature, arguments):
        try:
            return bus.call_blocking(sys.argv[1], path, 'org.example.Test', member, signature, arguments, byte_arrays=True)
        except dbus.exceptions.DBusException as e:
            print('error', e.get_dbus_name(), e.get_dbus_message())
            return None

    """

/// A Python client that keeps running, driven line by line.
final class PythonBusClient {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()

    init(_ script: String, environment: [String: String], arguments: [String] = []) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", script] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardInput = input
        process.standardOutput = output
        try process.run()
    }

    deinit {
        try? input.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }

    var pid: pid_t { process.processIdentifier }

    func readLine() -> String? {
        PrivateSessionBus.readLine(output.fileHandleForReading.fileDescriptor, deadline: .now + .seconds(20))
    }

    /// Closes its input, which the scripts take as the end, and waits for it to exit.
    func finish() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}

@Suite(.tags(.bus)) struct BusConnectionTests {
    @Test func aCallCarriesStringsBytesDictsVariantsAndStructsBothWays() throws {
        let wiped = ThreadResult<[String]>()
        let fixture = try BusLoopFixture { call in
            guard call.member == "Mix" else { return call.replyError(.unknownMethod(call.member)) }
            call.reply { (w: inout BusWriter) throws(BusError) in
                var r = call.arguments()
                let text = try r.string()
                let secret = try r.secretBytes()
                try w.string(text + "!")
                try w.bytes(secret: secret)
                // Keys and values swapped, each held in locked memory on the way.
                try r.enter("a", "{ss}")
                try w.open("a", "{ss}")
                while !r.atEnd {
                    try r.enter("e", "ss")
                    let key = try r.secretString()
                    let value = try r.secretString()
                    try r.exit()
                    try w.open("e", "ss")
                    try w.string(secret: value)
                    try w.string(secret: key)
                    try w.close()
                }
                try r.exit()
                try w.close()
                guard let variant = try r.peek(), variant.type == "v", variant.contents == "u" else {
                    throw .invalidArgs("a variant holding u expected")
                }
                try r.enter("v", "u")
                let number = try r.uint32()
                try r.exit()
                try w.open("v", "t")
                try w.uint64(UInt64(number) * 2)
                try w.close()
                try r.enter("r", "oayays")
                let path = try r.objectPath()
                let parameters = try r.bytes()
                let value = try r.bytes()
                let contentType = try r.string()
                try r.exit()
                #expect(r.atEnd)
                try w.open("r", "obs")
                try w.objectPath(path + "/x")
                try w.bool(true)
                try w.string("\(contentType) \(parameters) \(value.count)")
                try w.close()
            }
            // What was read as secret is gone from the message: zeros where the bytes were,
            // and strings that no longer read at all.
            var again = call.arguments()
            var seen: [String] = []
            _ = try? again.string()
            seen.append((try? again.bytes()).map { $0.map(String.init).joined(separator: ",") } ?? "unreadable")
            _ = try? again.enter("a", "{ss}")
            _ = try? again.enter("e", "ss")
            seen.append((try? again.string()) ?? "unreadable")
            wiped.set(seen)
        }
        fixture.start()
        let lines = try fixture.python("""
            r = call('/org/example/Test/child', 'Mix', 'saya{ss}v(oayays)',
                     ['héllo', b'\\x00s3\\xff', {'k1': 'v1', 'k2': 'v2'}, dbus.UInt32(21),
                      ('/a/b', b'\\x01\\x02', b'', 'text/plain')])
            print(r[0]); print(bytes(r[1]).hex()); print(sorted((str(k), str(v)) for k, v in r[2].items())); print(int(r[3]), r[3].variant_level)
            print(r[4][0], bool(r[4][1]), r[4][2])
            """)
        #expect(lines == ["héllo!", "007333ff", "[('v1', 'k1'), ('v2', 'k2')]", "42 1", "/a/b/x True text/plain [1, 2] 0"])
        #expect(eventually { wiped.value != nil } && wiped.value == ["0,0,0,0", "unreadable"])  // set after the reply
    }

    @Test func theHandlerGetsThePrefixAndEveryPathBelowItButNothingElse() throws {
        let fixture = try BusLoopFixture { call in
            call.reply { (w: inout BusWriter) throws(BusError) in
                try w.string("\(call.path) \(call.interface).\(call.member) [\(call.signature)] from \(call.sender.hasPrefix(":"))")
            }
        }
        fixture.start()
        let lines = try fixture.python("""
            print(call('/org/example/Test', 'A', '', []))
            print(call('/org/example/Test/x/y', 'B', 'su', ['s', 1]))
            call('/org/example/Testing', 'C', '', [])
            call('/org/other', 'D', '', [])
            o = bus.get_object(sys.argv[1], '/org/example/Test/z')
            print(o.Introspect(dbus_interface='org.freedesktop.DBus.Introspectable'))
            print(o.Get('org.example.Test', 'P', dbus_interface='org.freedesktop.DBus.Properties'))
            """)
        #expect(lines == [
            "/org/example/Test org.example.Test.A [] from true",
            "/org/example/Test/x/y org.example.Test.B [su] from true",
            "error org.freedesktop.DBus.Error.UnknownObject Unknown object '/org/example/Testing'.",
            "error org.freedesktop.DBus.Error.UnknownObject Unknown object '/org/other'.",
            "/org/example/Test/z org.freedesktop.DBus.Introspectable.Introspect [] from true",
            "/org/example/Test/z org.freedesktop.DBus.Properties.Get [ss] from true",
        ])
    }

    @Test func anUnknownMemberIsAnsweredWithTheHandlersError() throws {
        let fixture = try BusLoopFixture { call in
            if call.member == "Odd" { return call.replyError(BusError(name: "no.9dots", message: "odd name")) }
            call.replyError(.unknownMethod("no method \(call.member) in \(call.interface)"))
        }
        fixture.start()
        // An error name the bus daemon would disconnect us for goes as Failed; the connection stays.
        let lines = try fixture.python("""
            call('/org/example/Test', 'Nope', '', [])
            call('/org/example/Test', 'Odd', '', [])
            call('/org/example/Test', 'Nope', '', [])
            """)
        #expect(lines == ["error org.freedesktop.DBus.Error.UnknownMethod no method Nope in org.example.Test",
                          "error org.freedesktop.DBus.Error.Failed odd name",
                          "error org.freedesktop.DBus.Error.UnknownMethod no method Nope in org.example.Test"])
        #expect(BusError.invalidArgs("").hasValidName && BusError.connection("").hasValidName)
        #expect(!BusError(name: "single", message: "").hasValidName && !BusError(name: "a..b", message: "").hasValidName)
    }

    @Test func aWrongSignatureGetsInvalidArgsFromTheReader() throws {
        let fixture = try BusLoopFixture { call in
            call.reply { (w: inout BusWriter) throws(BusError) in
                var r = call.arguments()
                try w.string(try r.string())
                try r.enter("a", "{ss}")
            }
        }
        fixture.start()
        let lines = try fixture.python("""
            call('/org/example/Test', 'M', 'u', [dbus.UInt32(7)])
            call('/org/example/Test', 'M', 'sa{sv}', ['s', {'k': 'v'}])
            call('/org/example/Test', 'M', 's', ['s'])
            """)
        #expect(lines == [
            "error org.freedesktop.DBus.Error.InvalidArgs argument of type 's' expected, found 'u'",
            "error org.freedesktop.DBus.Error.InvalidArgs argument of type 'a{ss}' expected, found 'a{sv}'",
            "error org.freedesktop.DBus.Error.InvalidArgs argument of type 'a{ss}' expected, found the end of the arguments",
        ])
    }

    @Test func aCallDroppedWithoutReplyIsAnsweredFailedEvenOnAnotherThread() throws {
        let held = Recorded<BusCall>()
        let fixture = try BusLoopFixture { call in
            // "Here" is dropped at once on the loop thread; "There" is kept for the test
            // thread to drop, whose release must still reply, on the loop thread.
            if call.member == "There" { held.append(call) }
        }
        fixture.start()
        #expect(try fixture.python("call('/org/example/Test', 'Here', '', [])") == ["error org.freedesktop.DBus.Error.Failed no reply"])
        let answer = ThreadResult<[String]>()
        let destination = fixture.connection.uniqueName, environment = fixture.bus.environment
        Thread {
            answer.set((try? pythonBusClient("call('/org/example/Test', 'There', '', [])", destination: destination,
                                             environment: environment)) ?? [])
        }.start()
        #expect(eventually { held.count == 1 })
        held.removeAll()
        #expect(eventually { answer.value != nil })
        #expect(answer.value == ["error org.freedesktop.DBus.Error.Failed no reply"])
    }

    @Test func workPostedFromAnotherThreadRunsOnTheLoopThreadAndCanReply() throws {
        let ranOn = ThreadResult<pthread_t>()
        let fixture = try BusLoopFixture { call in
            // Answered later from elsewhere, as a prompt or a slow vault operation would be.
            Thread {
                call.connection.post {
                    ranOn.set(pthread_self())
                    call.reply { (w: inout BusWriter) throws(BusError) in try w.uint32(7) }
                }
            }.start()
        }
        fixture.start(tickInterval: .milliseconds(10))
        let lines = try fixture.python("print(int(call('/org/example/Test', 'Later', '', [])))")
        #expect(lines == ["7"])
        let loop = try #require(fixture.loopThread.value)
        #expect(ranOn.value.map { pthread_equal($0, loop) != 0 } == true)
        #expect(eventually { fixture.ticks.count >= 3 })
        #expect(fixture.stop() == .stopped)
    }

    @Test func stopBeforeRunEndsItAtOnce() throws {
        let bus = try PrivateSessionBus()
        let connection = try BusConnection.connect(address: bus.address)
        connection.stop()
        #expect(connection.run(tickInterval: .seconds(60)) {} == .stopped)
    }

    @Test func aTakenNameIsRefusedNamingItsOwnerAndReplaceTakesIt() throws {
        let first = try BusLoopFixture()
        let lost = ThreadResult<Bool>()
        first.connection.onNameLost = { lost.set(true) }
        try first.connection.requestName("org.example.Owned", replace: false)
        first.start()

        let second = try BusConnection.connect(address: first.bus.address)
        let comm = procText("/proc/self/comm").trimmingCharacters(in: .newlines)
        #expect(throws: BusError.nameTaken("org.example.Owned is already owned by pid \(getpid()) (\(comm))")) {
            try second.requestName("org.example.Owned", replace: false)
        }
        try second.requestName("org.example.Owned", replace: true)
        #expect(first.end() == .nameLost)
        #expect(lost.value == true)
        let owner = try first.python("print(bus.get_name_owner('org.example.Owned'))")
        #expect(owner == [second.uniqueName])
    }

    @Test func replaceCannotTakeANameFromAnOwnerThatDoesNotAllowIt() throws {
        let bus = try PrivateSessionBus()
        let holder = try PythonBusClient("""
            import sys, dbus
            bus = dbus.SessionBus()
            print(bus.request_name('org.example.Held', dbus.bus.NAME_FLAG_DO_NOT_QUEUE), flush=True)
            sys.stdin.read()
            """, environment: bus.environment)
        #expect(holder.readLine() == "\(dbus_PRIMARY_OWNER)")
        let connection = try BusConnection.connect(address: bus.address)
        #expect(throws: BusError.nameTaken("org.example.Held is already owned by pid \(holder.pid) (python3)")) {
            try connection.requestName("org.example.Held", replace: true)
        }
        holder.finish()
    }

    @Test func aPeerLeavingTheBusIsReportedByItsUniqueName() throws {
        let vanished = Recorded<String>()
        let fixture = try BusLoopFixture { call in
            call.reply { (w: inout BusWriter) throws(BusError) in try w.string(call.sender) }
        }
        fixture.connection.onPeerVanished = { name in vanished.append(name) }
        fixture.start()
        let lines = try fixture.python("print(bus.get_unique_name()); print(call('/org/example/Test', 'Hello', '', []))")
        #expect(lines.count == 2 && lines[0] == lines[1])
        #expect(eventually { vanished.all.contains(lines[0]) })
        #expect(!vanished.all.contains(fixture.connection.uniqueName))
    }

    @Test func aSignalReachesAPythonClient() throws {
        let fixture = try BusLoopFixture()
        fixture.start()
        let listener = try PythonBusClient("""
            import dbus, dbus.mainloop.glib
            from gi.repository import GLib
            dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
            bus = dbus.SessionBus()
            loop = GLib.MainLoop()
            def got(text, data, path=None):
                print('signal', path, text, bytes(data).hex(), flush=True)
                loop.quit()
            bus.add_signal_receiver(got, dbus_interface='org.example.Test', signal_name='Changed',
                                    path_keyword='path', byte_arrays=True)
            print('ready', flush=True)
            GLib.timeout_add_seconds(20, loop.quit)
            loop.run()
            """, environment: fixture.bus.environment)
        #expect(listener.readLine() == "ready")
        let sent = ThreadResult<String>()
        let connection = fixture.connection
        connection.post {
            let label = secureBuffer("label")
            do throws(BusError) {
                try connection.emitSignal(path: "/org/example/Test/item", interface: "org.example.Test", member: "Changed") {
                    (w: inout BusWriter) throws(BusError) in
                    try w.string(secret: label)
                    let plain = UnsafeMutableRawBufferPointer.allocate(byteCount: 2, alignment: 1)
                    defer { plain.deallocate() }
                    plain[0] = 1
                    plain[1] = 0xFE
                    try w.bytes(UnsafeRawBufferPointer(plain))
                }
                sent.set("sent")
            } catch {
                sent.set(error.message)
            }
        }
        #expect(listener.readLine() == "signal /org/example/Test/item label 01fe")
        #expect(eventually { sent.value == "sent" })  // the loop sets it after the send the client already heard
        listener.finish()
    }

    @Test func credentialsComeFromTheBusDaemon() throws {
        let fixture = try BusLoopFixture { call in
            call.reply { (w: inout BusWriter) throws(BusError) in
                let (pid, uid) = try call.connection.credentials(of: call.sender)
                try w.uint32(UInt32(pid))
                try w.uint32(uid)
            }
        }
        fixture.start()
        let lines = try fixture.python("""
            r = call('/org/example/Test', 'WhoAmI', '', [])
            print(os.getpid(), os.geteuid()); print(int(r[0]), int(r[1]))
            """)
        #expect(lines.count == 2 && lines[0] == lines[1])
        #expect(lines.first != "\(getpid()) \(geteuid())")
    }

    @Test func credentialsOfAPeerThatIsGoneAreAnError() throws {
        let fixture = try BusLoopFixture { call in
            call.reply { (w: inout BusWriter) throws(BusError) in
                _ = try call.connection.credentials(of: ":1.9999")
            }
        }
        fixture.start()
        let lines = try fixture.python("call('/org/example/Test', 'Who', '', [])")
        #expect(lines.count == 1 && lines[0].hasPrefix("error org.freedesktop.DBus.Error.Failed the bus does not know the process of :1.9999"))
    }

    @Test func theLoopEndsWhenTheBusGoesAway() throws {
        let fixture = try BusLoopFixture()
        fixture.start()
        fixture.bus.stop()
        #expect(fixture.end() == .disconnected)
    }

    @Test func aBusThatIsNotThereIsOneClearLine() throws {
        let directory = NSTemporaryDirectory() + "keychainfs-nobus-" + UUID().uuidString
        #expect(throws: BusError.connection("cannot connect to the session bus at unix:path=\(directory)/bus: No such file or directory")) {
            _ = try BusConnection.connect(address: "unix:path=\(directory)/bus")
        }
    }
}

/// Values recorded from any thread.
final class Recorded<T: Sendable>: Sendable {
    private let values = Mutex<[T]>([])
    func append(_ value: T) { values.withLock { $0.append(value) } }
    func removeAll() { values.withLock { $0.removeAll() } }
    var all: [T] { values.withLock { $0 } }
    var count: Int { values.withLock { $0.count } }
}

/// Locked memory holding `text`, as a secret read from the vault would be.
func secureBuffer(_ text: String) -> SecureBuffer {
    var buffer = try! SecureBuffer(capacity: text.utf8.count)
    buffer.withUnsafeMutableStorage { storage in
        storage.copyBytes(from: text.utf8)
        return text.utf8.count
    }
    return buffer
}

/// DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER, as dbus-python returns it.
private let dbus_PRIMARY_OWNER = 1
