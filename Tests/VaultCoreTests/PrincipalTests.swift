import Foundation
import Glibc
import SystemPackage
import Testing
@testable import VaultCore

/// `--exe` and `--unit` against real processes.
@Suite struct ExecutablePrincipalTests {
    let directory = FileManager.default.temporaryDirectory.path + "/kcfs-exe-" + UUID().uuidString

    init() throws {
        try FileManager.default.createDirectory(atPath: directory + "/allowed", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: directory + "/other", withIntermediateDirectories: true)
    }

    @Test func onlyProcessesRunningTheFileAtThePathNowMatch() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let allowed = directory + "/allowed/head", twin = directory + "/other/head"
        try copyExecutable("/usr/bin/head", to: allowed)
        try copyExecutable("/usr/bin/head", to: twin)
        let principal = try Principal.executable(at: allowed)

        let running = try ChildProcess(allowed, ["-c", "1"])
        let copy = try ChildProcess(twin, ["-c", "1"])
        let original = try ChildProcess("/usr/bin/head", ["-c", "1"])
        #expect(principal.matches(ProcessIdentity(pid: running.pid)))
        #expect(!principal.matches(ProcessIdentity(pid: copy.pid)), "a byte-identical copy elsewhere is another file")
        #expect(!principal.matches(ProcessIdentity(pid: original.pid)))
        #expect(!principal.matches(ProcessIdentity(pid: getpid())))
        #expect(!principal.fileChanged)

        // An upgrade: a new file renamed over the allowed path while the old one still runs.
        try copyExecutable("/usr/bin/head", to: directory + "/allowed/.head.new")
        #expect(rename(directory + "/allowed/.head.new", allowed) == 0)
        #expect(!principal.matches(ProcessIdentity(pid: running.pid)), "the replaced binary still runs, but is not the file at the path")
        #expect(principal.fileChanged)
        let upgraded = try ChildProcess(allowed, ["-c", "1"])
        #expect(principal.matches(ProcessIdentity(pid: upgraded.pid)))

        #expect(unlink(allowed) == 0)
        #expect(!principal.matches(ProcessIdentity(pid: upgraded.pid)), "no file at the path: nothing matches")
        #expect(ProcessIdentity(pid: upgraded.pid).executable?.path.hasSuffix(" (deleted)") == true)
    }

    /// The file a rule was made for, rewritten in place (same inode, other bytes): no longer
    /// matched, and marked; a principal made before fingerprints matches by inode alone.
    @Test func aFileRewrittenInPlaceStopsMatching() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let allowed = directory + "/allowed/head"
        try copyExecutable("/usr/bin/head", to: allowed)
        let principal = try Principal.executable(at: allowed)
        guard case .executable(_, let device, let inode, let fingerprint) = principal else { return }
        #expect(fingerprint != nil)
        let unrecorded = Principal.executable(path: allowed, device: device, inode: inode, fingerprint: nil)
        let before = try ChildProcess(allowed, ["-c", "1"])
        #expect(principal.matches(ProcessIdentity(pid: before.pid)) && !principal.fileChanged && !principal.lacksFingerprint)
        before.end()  // a running executable cannot be written (ETXTBSY)

        let fd = open(allowed, O_WRONLY | O_TRUNC)
        try #require(fd >= 0)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: "/usr/bin/tail"))
        #expect(bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count)
        close(fd)
        #expect(FileIdentity.of(path: allowed) == FileIdentity(device: device, inode: inode), "the same inode")
        let after = try ChildProcess(allowed, ["-n", "1"])
        #expect(!principal.matches(ProcessIdentity(pid: after.pid)))
        #expect(principal.fileChanged)
        #expect(unrecorded.matches(ProcessIdentity(pid: after.pid)) && !unrecorded.fileChanged && unrecorded.lacksFingerprint,
                "without a fingerprint, only the inode is compared")
    }

    @Test func anExecutableIsGivenByAnAbsolutePathToAFile() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(throws: AccessRuleError.executableNotAbsolute("usr/bin/head")) { try Principal.executable(at: "usr/bin/head") }
        #expect(throws: AccessRuleError.executableNotFound(path: "/nonexistent/x", errno: .noSuchFileOrDirectory)) {
            try Principal.executable(at: "/nonexistent/x")
        }
        #expect(throws: AccessRuleError.executableNotAFile("/usr/bin")) { try Principal.executable(at: "/usr/bin") }
        #expect(throws: AccessRuleError.invalidUnit("nginx")) { try Principal.unit(named: "nginx") }
        #expect(throws: AccessRuleError.invalidUnit("a/b.service")) { try Principal.unit(named: "a/b.service") }
        #expect(try Principal.unit(named: "nginx.service") == .unit("nginx.service"))
    }
}

/// The cgroup v2 hierarchy, if this machine has one we may create groups in.
enum CgroupV2 {
    static let mountpoint: String? = {
        guard let mounts = ProcFile.contents("/proc/self/mounts", in: AT_FDCWD) else { return nil }
        for line in mounts.split(separator: 0x0A) {
            let fields = line.split(separator: 0x20).map { String(decoding: $0, as: UTF8.self) }
            if fields.count > 2 && fields[2] == "cgroup2" { return fields[1] }
        }
        return nil
    }()

    static let writable: Bool = {
        guard let mountpoint else { return false }
        let probe = mountpoint + "/kcfs-probe-" + UUID().uuidString
        guard mkdir(probe, 0o755) == 0 else { return false }
        rmdir(probe)
        return true
    }()
}

@Suite(.enabled(if: CgroupV2.writable, "needs a cgroup v2 hierarchy this user may create groups in (root, or a delegated one)"))
struct UnitPrincipalTests {
    /// Moves a new `sleep` into a cgroup at `relativePath` below the hierarchy's root, runs
    /// `body` with it, and removes the groups again.
    func withProcess(inGroup relativePath: String, _ body: (pid_t) throws -> Void) throws {
        let root = try #require(CgroupV2.mountpoint)
        let components = relativePath.split(separator: "/")
        var created: [String] = []
        defer {
            // The kernel may take a moment to see an ended process leave its group.
            for group in created.reversed() { #expect(pollUntil { rmdir(group) == 0 }, "\(group): \(errno)") }
        }
        var group = root
        for component in components {
            group += "/" + component
            try #require(mkdir(group, 0o755) == 0, "\(group): \(errno)")
            created.append(group)
        }
        let child = try ChildProcess("/usr/bin/sleep", ["60"])
        defer { child.end() }  // before the groups go: a group with a process cannot be removed
        try "\(child.pid)".write(toFile: group + "/cgroup.procs", atomically: false, encoding: .utf8)
        try body(child.pid)
    }

    @Test func aProcessInAServiceIsInThatUnit() throws {
        let name = "kcfs-test-\(UUID().uuidString).service"
        try withProcess(inGroup: name) { pid in
            let identity = ProcessIdentity(pid: pid)
            #expect(identity.cgroup == "/" + name)
            #expect(identity.unit == name)
            #expect(Principal.unit(name).matches(identity))
            #expect(!Principal.unit("other.service").matches(identity))
            #expect(!Principal.unit(name).matches(ProcessIdentity(pid: getpid())))
        }
    }

    @Test func onlyTheInnermostUnitCounts() throws {
        let id = UUID().uuidString
        let outer = "kcfs-test-user@\(id).service", inner = "kcfs-test-\(id).scope"
        try withProcess(inGroup: "kcfs-test-\(id).slice/\(outer)/app.slice/\(inner)") { pid in
            let identity = ProcessIdentity(pid: pid)
            #expect(identity.unit == inner)
            #expect(Principal.unit(inner).matches(identity))
            #expect(!Principal.unit(outer).matches(identity), "a process of a unit below the user manager is not the user manager's")
        }
        try withProcess(inGroup: "kcfs-test-\(id).slice/\(outer)/app.slice") { pid in
            #expect(Principal.unit(outer).matches(ProcessIdentity(pid: pid)))
        }
    }
}
