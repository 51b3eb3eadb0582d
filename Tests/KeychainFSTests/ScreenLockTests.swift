@testable import DBus
@testable import Daemon
import Foundation
import Glibc
@testable import KeychainFS
import Testing

/// A stand-in for logind on a private bus: owns org.freedesktop.login1, answers
/// GetSessionByPID with one session, and sends logind's signals when told.
final class LogindStandIn {
    static let session = "/org/freedesktop/login1/session/test"
    let bus: PrivateSessionBus
    private let connection: BusConnection
    private let asked = Recorded<UInt32>()
    private let askedByID = Recorded<String>()
    private let ended = ThreadResult<BusConnection.Ended>()

    /// `sessionOfPID` false: GetSessionByPID answers NoSessionForPID, as for a process that
    /// `systemd --user` started, and only GetSession("test") finds the session.
    init(sessionOfPID: Bool = true) throws {
        bus = try PrivateSessionBus()
        connection = try BusConnection.connect(address: bus.address)
        try connection.requestName(ScreenLockWatcher.logind, replace: false)
        let asked = asked, askedByID = askedByID
        try connection.serve(prefix: ScreenLockWatcher.managerPath) { call in
            guard call.interface == ScreenLockWatcher.managerInterface else { return call.replyError(.unknownMethod(call.member)) }
            var arguments = call.arguments()
            switch call.member {
            case "GetSessionByPID":
                guard let pid = try? arguments.uint32() else { return call.replyError(.invalidArgs("a pid expected")) }
                asked.append(pid)
                guard sessionOfPID else {
                    return call.replyError(BusError(name: "org.freedesktop.login1.NoSessionForPID", message: "PID \(pid) does not belong to any known session"))
                }
            case "GetSession":
                guard let id = try? arguments.string(), id == "test" else {
                    return call.replyError(BusError(name: "org.freedesktop.login1.NoSuchSession", message: "no such session"))
                }
                askedByID.append(id)
            default:
                return call.replyError(.unknownMethod(call.member))
            }
            call.reply { (writer: inout BusWriter) throws(BusError) in try writer.objectPath(LogindStandIn.session) }
        }
        let connection = connection, ended = ended
        Thread { ended.set(connection.run(tickInterval: .seconds(1)) {}) }.start()
    }

    deinit {
        connection.stop()
        _ = eventually { ended.value != nil }
        bus.stop()
    }

    /// For the mount: this bus as its system bus.
    var environment: [String: String] { ["DBUS_SYSTEM_BUS_ADDRESS": bus.address] }

    /// The pids that asked for their session.
    var askedPIDs: [UInt32] { asked.all }
    /// The session ids asked for.
    var askedIDs: [String] { askedByID.all }

    enum Signal {
        case lock(session: String)
        case lockedHint(Bool)
        case prepareForSleep(Bool)
    }

    func send(_ signal: Signal) {
        let connection = connection
        connection.post {
            do throws(BusError) {
                switch signal {
                case .lock(let session):
                    try connection.emitSignal(path: session, interface: ScreenLockWatcher.sessionInterface, member: "Lock") { _ in }
                case .lockedHint(let value):
                    try connection.emitSignal(path: LogindStandIn.session, interface: "org.freedesktop.DBus.Properties",
                                              member: "PropertiesChanged") { (writer) throws(BusError) in
                        try writer.string(ScreenLockWatcher.sessionInterface)
                        try writer.open("a", "{sv}")
                        try writer.open("e", "sv")
                        try writer.string("LockedHint")
                        try writer.open("v", "b")
                        try writer.bool(value)
                        try writer.close()
                        try writer.close()
                        try writer.close()
                        try writer.open("a", "s")
                        try writer.close()
                    }
                case .prepareForSleep(let value):
                    try connection.emitSignal(path: ScreenLockWatcher.managerPath, interface: ScreenLockWatcher.managerInterface,
                                              member: "PrepareForSleep") { (writer) throws(BusError) in try writer.bool(value) }
                }
            } catch {
                Issue.record("the stand-in could not send its signal: \(error.message)")
            }
        }
    }
}

@Suite(.tags(.mount, .bus)) struct ScreenLockTests {
    /// A mount that follows the stand-in, once its daemon has asked for its session (so every
    /// match is in place: they are added before it asks).
    private func followingMount(_ logind: LogindStandIn) throws -> MountFixture {
        let m = try MountFixture()
        try m.unmount()
        let mounted = try m.mount(extra: ["--lock-on-screen-lock"], environment: logind.environment)
        try #require(mounted.exitStatus == .success, "\(mounted.stderr)")
        let daemon = try status(m.mountpoint).pid
        try #require(eventually { logind.askedPIDs.contains(UInt32(daemon)) }, "the daemon never asked logind for its session")
        return m
    }

    @Test func eachOfLogindsSignalsLocksTheMount() throws {
        let logind = try LogindStandIn()
        let m = try followingMount(logind)
        #expect(writeFile(m.path("token"), Array("secret".utf8)) == 0)
        for signal: LogindStandIn.Signal in [.lock(session: LogindStandIn.session), .lockedHint(true), .prepareForSleep(true)] {
            try #require(try status(m.mountpoint).locked == false)
            #expect(readFile(m.path("token")) == Array("secret".utf8))
            logind.send(signal)
            #expect(eventually { (try? status(m.mountpoint).locked) == true }, "\(signal) did not lock the mount")
            #expect(errnoOf { open(m.path("token"), O_RDONLY | O_CLOEXEC) } == EACCES)
            let unlocked = try run(keychainfsBinary, ["unlock", "--passphrase-file", m.cli.passphraseFile, m.mountpoint])
            try #require(unlocked.exitStatus == .success, "\(unlocked.stderr)")
        }
    }

    @Test func aDaemonInNoSessionFollowsTheOneXDGSessionIDNames() throws {
        let logind = try LogindStandIn(sessionOfPID: false)
        let m = try MountFixture()
        try m.unmount()
        let mounted = try m.mount(extra: ["--lock-on-screen-lock"], environment: logind.environment.merging(["XDG_SESSION_ID": "test"]) { $1 })
        try #require(mounted.exitStatus == .success, "\(mounted.stderr)")
        try #require(eventually { logind.askedIDs == ["test"] }, "the daemon never asked logind for session test")
        logind.send(.lock(session: LogindStandIn.session))
        #expect(eventually { (try? status(m.mountpoint).locked) == true })
    }

    @Test func anotherSessionsLockAnUnlockedHintAndAWakeUpDoNothing() throws {
        let logind = try LogindStandIn()
        let f = try CLIFixture()
        let mountpoint = f.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let logFile = f.directory + "/daemon.stderr"
        let daemon = try ForegroundDaemon(f, mountpoint: mountpoint, extra: ["--lock-on-screen-lock"], standardError: logFile,
                                          environment: logind.environment)
        defer { _ = try? run(keychainfsBinary, ["unmount", mountpoint]) }
        try #require(eventually { logind.askedPIDs.contains(UInt32(daemon.process.processIdentifier)) })
        logind.send(.lock(session: "/org/freedesktop/login1/session/other"))
        logind.send(.lockedHint(false))
        logind.send(.prepareForSleep(false))
        // Handled in the order sent: once this one has locked, the ones before it were handled.
        logind.send(.prepareForSleep(true))
        #expect(eventually { procText(logFile).contains("\(mountpoint): locked: the machine is about to sleep") }, "\(procText(logFile))")
        #expect(try status(mountpoint).locked)
        let lines = procText(logFile).split(separator: "\n").filter { $0.contains(": locked") }
        #expect(lines.count == 1, "\(lines)")
    }

    @Test func withoutASystemBusTheMountGoesOnAndSaysSo() throws {
        let f = try CLIFixture()
        let mountpoint = f.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let logFile = f.directory + "/daemon.stderr"
        _ = try ForegroundDaemon(f, mountpoint: mountpoint, extra: ["--lock-on-screen-lock"], standardError: logFile,
                                 environment: ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=" + f.directory + "/no-bus"])
        defer { _ = try? run(keychainfsBinary, ["unmount", mountpoint]) }
        #expect(eventually { procText(logFile).contains("\(mountpoint): --lock-on-screen-lock: cannot follow logind on the system bus (cannot connect to the system bus at") },
                "\(procText(logFile))")
        #expect(writeFile(mountpoint + "/token", Array("secret".utf8)) == 0)
        #expect(readFile(mountpoint + "/token") == Array("secret".utf8))
        #expect(try status(mountpoint).locked == false)
    }
}
