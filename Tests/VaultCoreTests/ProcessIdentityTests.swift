import Foundation
import Glibc
import Testing
@testable import VaultCore

/// Who a process is, from /proc, for real processes.
@Suite struct ProcessIdentityTests {
    @Test func thisProcessIsTheFileItsExeLinkLeadsTo() throws {
        let identity = ProcessIdentity(pid: getpid())
        let target = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        var info = stat()
        #expect(stat(target, &info) == 0)
        let executable = try #require(identity.executable)
        #expect(executable.file == FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)))
        #expect(executable.path == target)
        #expect(identity.processID == getpid())
        #expect(identity.cgroup != nil)
        // Clock ticks since boot: after boot, before now.
        let start = try #require(identity.startTime)
        let uptime = try #require(Double(String(decoding: ProcFile.contents("/proc/uptime", in: AT_FDCWD)!, as: UTF8.self)
            .split(separator: " ")[0]))
        #expect(start > 0 && Double(start) <= uptime * Double(sysconf(Int32(_SC_CLK_TCK))) + 1)
    }

    @Test func aChildIsItsOwnExecutableAndStartedAfterUs() throws {
        let child = try ChildProcess("/usr/bin/sleep", ["60"])
        let identity = ProcessIdentity(pid: child.pid)
        #expect(identity.executable?.file == FileIdentity.of(path: "/usr/bin/sleep"))
        #expect(identity.executable?.path == "/usr/bin/sleep")
        #expect(identity.processID == child.pid)
        let ours = try #require(ProcessIdentity(pid: getpid()).startTime)
        #expect(try #require(identity.startTime) >= ours)
    }

    @Test func aThreadIsNamedByItsProcess() throws {
        // A thread id is what FUSE reports; the answer to a confirmation belongs to the process.
        let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").compactMap { pid_t($0) }
        let thread = try #require(tasks.first { $0 != getpid() }, "the test runner has more than one thread")
        let identity = ProcessIdentity(pid: thread)
        #expect(identity.processID == getpid())
        #expect(identity.startTime == ProcessIdentity(pid: getpid()).startTime)
    }

    @Test func aProcessThatIsGoneIsNobody() throws {
        let child = try ChildProcess("/usr/bin/sleep", ["60"])
        let identity = ProcessIdentity(pid: child.pid)
        child.end()  // killed and reaped: /proc/PID is gone
        #expect(identity.executable == nil)
        #expect(identity.cgroup == nil && identity.unit == nil)
        #expect(identity.processID == nil && identity.startTime == nil)
    }

    @Test func aFieldFirstReadAfterTheProcessEndedIsNil() throws {
        // Read once through /proc/PID: a later field of an identity whose process ended is nil,
        // never what a process given the same pid would say.
        let child = try ChildProcess("/usr/bin/sleep", ["60"])
        let identity = ProcessIdentity(pid: child.pid)
        #expect(identity.executable != nil)
        child.end()
        #expect(identity.cgroup == nil)
        #expect(identity.startTime == nil)
    }

    @Test func theUnitIsTheInnermostServiceOrScope() {
        #expect(ProcessIdentity.unit(inCgroup: "/system.slice/nginx.service") == "nginx.service")
        #expect(ProcessIdentity.unit(inCgroup: "/user.slice/user-1000.slice/user@1000.service/app.slice/foo.service") == "foo.service")
        #expect(ProcessIdentity.unit(inCgroup: "/user.slice/user-1000.slice/user@1000.service/app.slice") == "user@1000.service")
        #expect(ProcessIdentity.unit(inCgroup: "/user.slice/user-1000.slice/session-3.scope") == "session-3.scope")
        #expect(ProcessIdentity.unit(inCgroup: "/system.slice/docker-1.scope/inner") == "docker-1.scope")
        #expect(ProcessIdentity.unit(inCgroup: "/") == nil)
        #expect(ProcessIdentity.unit(inCgroup: "/user.slice") == nil)
        #expect(ProcessIdentity.unit(inCgroup: "/a/.service") == nil)
    }

    @Test func startTimeIsCountedFromTheLastParenthesis() {
        // A command name may hold ") " itself.
        let line = "42 (a) b) S 1 42 42 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 987654 0 0"
        #expect(ProcessIdentity.startTime(inStat: Array(line.utf8)) == 987654)
        #expect(ProcessIdentity.startTime(inStat: Array("42 (x) S 1".utf8)) == nil)
    }
}

/// Who owns a unit's cgroup decides whether `--unit` may trust it: a user can create and enter
/// cgroups of any name in the subtree systemd delegates to them.
@Suite struct UnitOwnershipTests {
    @Test func aUnitOwnedByTheMountingUserIsNotTrusted() {
        #expect(ProcessIdentity.trustsUnit(owner: 0, mountingUser: 1000))
        #expect(ProcessIdentity.trustsUnit(owner: 998, mountingUser: 1000))
        #expect(!ProcessIdentity.trustsUnit(owner: 1000, mountingUser: 1000))
        #expect(!ProcessIdentity.trustsUnit(owner: nil, mountingUser: 1000))
        // Root's own mount: root owns everything and could place any process anywhere.
        #expect(ProcessIdentity.trustsUnit(owner: 0, mountingUser: 0))
    }

    @Test func theOwnerOfAProcessUnitIsTheOwnerOfItsCgroupDirectory() throws {
        guard let root = ProcessIdentity.cgroup2Root else { return }
        let unit = "kcfs-owner-\(getpid()).service"
        let directory = root + "/" + unit
        #expect(mkdir(directory, 0o755) == 0)
        defer { rmdir(directory) }
        #expect(chown(directory, 4242, 4242) == 0)
        let child = try ChildProcess("/bin/cat")
        defer { child.end() }
        // Moved out again before the group is removed (a populated cgroup cannot be).
        defer { try? "\(child.pid)".write(toFile: root + "/cgroup.procs", atomically: false, encoding: .utf8) }
        try "\(child.pid)".write(toFile: directory + "/cgroup.procs", atomically: false, encoding: .utf8)
        let identity = ProcessIdentity(pid: child.pid)
        #expect(identity.unit == unit)
        #expect(identity.unitOwner == 4242)
        // A unit rule for that name does not admit it when the mounting user owns the group.
        #expect(!ProcessIdentity.trustsUnit(owner: identity.unitOwner, mountingUser: 4242))
    }
}
