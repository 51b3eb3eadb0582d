import CLinux
import Glibc
import Locking
import Synchronization
import SystemCalls

/// The process behind a request, as the kernel records it: its executable, its systemd unit
/// and when it started. Each costs a /proc read, so each is read only when first asked for,
/// and at most once.
///
/// The process is pinned when the identity is made (a pidfd: at once for a FUSE request, or
/// the one the kernel attached to a socket message), and the first field asked for opens
/// `/proc/PID` and checks that the pinned process is still alive then: every later field is
/// read through that directory, so a pid given to another process meanwhile is never
/// described as the requester (its reads fail: nil).
///
/// Never `comm` or `argv`: a process sets those for itself.
public final class ProcessIdentity: Sendable {
    /// The executable: the file `/proc/PID/exe` leads to (what the process runs even when that
    /// file was since deleted or replaced), and the text of that link, for messages only.
    public struct Executable: Hashable, Sendable {
        public let file: FileIdentity
        /// Ends in " (deleted)" when the file is gone; never used for matching.
        public let path: String
    }

    /// The pid as given; FUSE gives a thread's id, which /proc answers for as well.
    public let pid: pid_t
    /// The pinned process; -1 when it was gone before it could be pinned.
    private let pidfd: Int32
    private let state = OrderedMutex(.processIdentity, State())

    enum Field<Value: Sendable>: Sendable {
        case unread
        case read(Value?)
    }

    struct State: Sendable {
        var directory: Field<Int32> = .unread
        var executable: Field<Executable> = .unread
        var cgroup: Field<String> = .unread
        var startTime: Field<UInt64> = .unread
        var status: Field<ProcessStatus> = .unread
        var userNamespace: Field<Bool> = .unread
        var loaderVariables: Field<[String]> = .unread
        var writableCode: Field<String> = .unread
    }

    /// Pins `pid` (a process or one of its threads) at once.
    public init(pid: pid_t) {
        self.pid = pid
        do {
            pidfd = try SystemCall.once { clinux_pidfd_open(pid, 1) }
        } catch .invalidArgument {  // before Linux 6.9: no thread pidfds
            pidfd = clinux_pidfd_open(pid, 0)
        } catch {
            pidfd = -1
        }
    }

    /// Takes over `pidfd`, which the kernel made for `pid` (SCM_PIDFD), and closes it when done.
    public init(pid: pid_t, pidfd: Int32) {
        self.pid = pid
        self.pidfd = pidfd
    }

    deinit {
        state.withLock { state in
            if case .read(let fd?) = state.directory { close(fd) }
        }
        if pidfd >= 0 { close(pidfd) }
    }

    /// Whether the pinned process has not exited (a pidfd polls readable once it has).
    public var isAlive: Bool {
        guard pidfd >= 0 else { return false }
        var entry = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) == 0
    }

    /// nil when the process is gone or its executable cannot be reached.
    public var executable: Executable? {
        resolve(\.executable) { directory in
            var info = stat()
            guard fstatat(directory, "exe", &info, 0) == 0 else { return nil }
            var link = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let count = readlinkat(directory, "exe", &link, link.count - 1)
            let path = count > 0 ? String(decoding: link[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?"
            return Executable(file: FileIdentity(info), path: path)
        }
    }

    /// The cgroup v2 path (the `0::PATH` line), such as `/system.slice/nginx.service`; nil when
    /// the process is gone or is in no cgroup v2 hierarchy.
    public var cgroup: String? {
        resolve(\.cgroup) { directory in
            guard let bytes = ProcFile.contents("cgroup", in: directory) else { return nil }
            for line in bytes.split(separator: 0x0A) where line.starts(with: [0x30, 0x3A, 0x3A]) {
                return String(decoding: line.dropFirst(3), as: UTF8.self)
            }
            return nil
        }
    }

    /// The systemd unit or scope the process runs in: the innermost component of its cgroup
    /// that ends in `.service` or `.scope` (see `unit(inCgroup:)`).
    public var unit: String? {
        cgroup.flatMap(ProcessIdentity.unit(inCgroup:))
    }

    /// Who owns the cgroup directory of the process's unit (the cgroup path up to its innermost
    /// `.service` or `.scope`), nil when unknown. systemd creates system units' directories as
    /// root; a user's own units and scopes (under `user@UID.service`, delegated to the user)
    /// belong to the user, who may create one of any name and move processes into it.
    public var unitOwner: uid_t? {
        guard let cgroup, let unit, let root = ProcessIdentity.cgroup2Root else { return nil }
        let components = cgroup.split(separator: "/")
        guard let index = components.lastIndex(where: { $0 == unit }) else { return nil }
        var info = stat()
        guard stat(root + "/" + components[...index].joined(separator: "/"), &info) == 0 else { return nil }
        return info.st_uid
    }

    /// Whether a unit whose cgroup directory `owner` owns can vouch for its processes to a mount
    /// of `mountingUser`: not when the mounting user owns it, since any of the user's processes
    /// could then place itself in a cgroup of that name. (Root owns everything anyway.)
    public static func trustsUnit(owner: uid_t?, mountingUser: uid_t) -> Bool {
        guard let owner else { return false }
        return owner == 0 || owner != mountingUser
    }

    /// Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified`
    /// on a hybrid system); read once.
    static let cgroup2Root: String? = {
        guard let bytes = ProcFile.contents("/proc/self/mounts", in: AT_FDCWD) else { return nil }
        for line in bytes.split(separator: 0x0A) {
            let fields = line.split(separator: 0x20)
            if fields.count > 2, fields[2].elementsEqual("cgroup2".utf8) { return String(decoding: fields[1], as: UTF8.self) }
        }
        return nil
    }()

    /// The process (thread group) the pid belongs to: the pid itself unless it names one of a
    /// process's other threads.
    public var processID: pid_t? { status?.processID }

    /// Its `status` file: read once, like every field.
    public var status: ProcessStatus? {
        resolve(\.status) { directory in ProcFile.contents("status", in: directory).flatMap(ProcessStatus.init) }
    }

    /// When the process (its thread group, not the thread) started, in clock ticks since boot:
    /// field 22 of /proc/PID/stat. A pid and its start time name one process for good, where
    /// a pid alone is given again once its process ends.
    public var startTime: UInt64? {
        guard let processID else { return nil }
        return resolve(\.startTime) { directory in
            let bytes: [UInt8]?
            if processID == pid {
                bytes = ProcFile.contents("stat", in: directory)
            } else {
                bytes = ProcFile.contents("/proc/\(processID)/stat", in: AT_FDCWD)
            }
            return bytes.flatMap(ProcessIdentity.startTime(inStat:))
        }
    }

    /// The unit of a cgroup v2 path. Only the innermost `.service` or `.scope` counts: a process
    /// in `/user.slice/user-1000.slice/user@1000.service/app.slice/foo.service` is in
    /// `foo.service`, not in `user@1000.service`, whose rule would otherwise admit every
    /// program of the user's session. A process directly under `user@1000.service/app.slice`
    /// is in `user@1000.service`.
    static func unit(inCgroup path: String) -> String? {
        path.split(separator: "/").last(where: { component in
            (component.hasSuffix(".service") && component.count > ".service".count)
                || (component.hasSuffix(".scope") && component.count > ".scope".count)
        }).map(String.init)
    }

    /// Field 22 of a /proc/PID/stat line. The command name (field 2) is in parentheses and may
    /// hold spaces and parentheses itself, so fields are counted from the last ')'.
    static func startTime(inStat bytes: [UInt8]) -> UInt64? {
        guard let close = bytes.lastIndex(of: 0x29) else { return nil }
        let fields = bytes[(close + 1)...].split(separator: 0x20)
        // fields[0] is field 3 (the state).
        guard fields.count > 19 else { return nil }
        return UInt64(String(decoding: fields[19], as: UTF8.self))
    }

    func resolve<Value: Sendable>(_ field: WritableKeyPath<State, Field<Value>>,
                                          _ read: (Int32) -> Value?) -> Value? {
        state.withLock { state in
            if case .read(let value) = state[keyPath: field] { return value }
            if case .unread = state.directory {
                var fd = open("/proc/\(pid)", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                // Opened after the pin: if the pinned process still lives, the directory is its.
                if fd >= 0 && !isAlive {
                    close(fd)
                    fd = -1
                }
                state.directory = .read(fd >= 0 ? fd : nil)
            }
            guard case .read(let directory?) = state.directory else {
                state[keyPath: field] = .read(nil)
                return nil
            }
            let value = read(directory)
            state[keyPath: field] = .read(value)
            return value
        }
    }
}
