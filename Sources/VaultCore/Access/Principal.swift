import Glibc
import SystemCalls

/// Whom a rule admits: the processes running one executable file, or those of one systemd
/// unit or scope.
public enum Principal: Hashable, Sendable, CustomStringConvertible {
    /// Processes whose executable, as the kernel records it (`/proc/PID/exe`), is the file at
    /// `path` now. `device`, `inode` and `fingerprint` are that file as it was when the rule was
    /// made. Matching stats `path` afresh at each decision, so a byte-identical copy elsewhere
    /// never matches, a process still running a binary that was replaced or deleted stops
    /// matching, and a rule keeps working across upgrades that rename a new file over the path
    /// (whoever may replace the file at `path` may therefore take the rule's access: `allow`
    /// refuses a path the user could replace, see `ExecutableOwnership`). The file the rule was
    /// made for, still at the path, matches only while its fingerprint is the recorded one: a
    /// rewrite in place (same inode, new bytes) stops matching. Rules made before fingerprints
    /// were recorded have none (nil) and match by inode alone; `rules` says so.
    case executable(path: String, device: UInt64, inode: UInt64, fingerprint: FileFingerprint?)
    /// Processes whose innermost unit or scope (`ProcessIdentity.unit`) is this name, when the
    /// unit's cgroup is not the mounting user's own (`ProcessIdentity.trustsUnit`).
    case unit(String)

    /// A principal for the executable at `path` as it is now.
    public static func executable(at path: String) throws(AccessRuleError) -> Principal {
        guard path.hasPrefix("/") else { throw .executableNotAbsolute(path) }
        var info = stat()
        guard stat(path, &info) == 0 else { throw .executableNotFound(path: path, errno: .last) }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw .executableNotAFile(path) }
        return .executable(path: path, device: UInt64(info.st_dev), inode: UInt64(info.st_ino), fingerprint: FileFingerprint(info))
    }

    public static func unit(named name: String) throws(AccessRuleError) -> Principal {
        guard !name.contains("/"), ProcessIdentity.unit(inCgroup: name) == name else { throw .invalidUnit(name) }
        return .unit(name)
    }

    /// Whether `identity` is one of the processes this principal names; a process that is gone
    /// matches nothing.
    public func matches(_ identity: ProcessIdentity) -> Bool {
        var files = FileIdentityCache()
        return matches(identity, files: &files)
    }

    func matches(_ identity: ProcessIdentity, files: inout FileIdentityCache) -> Bool {
        match(identity, files: &files) != nil
    }

    /// How a process is known to be one this principal names.
    enum Match {
        /// Its executable, as /proc shows it, is the file.
        case executable
        /// Its executable cannot be read (the program is not dumpable) and it runs with the
        /// effective group of the file, a setgid program whose group the mounting user is not
        /// in: only an exec of such a file gives that group, and that exec was a secure one
        /// (AT_SECURE: the loader ignored LD_PRELOAD and the like).
        case setgidExecutable
        case unit
    }

    func match(_ identity: ProcessIdentity, files: inout FileIdentityCache) -> Match? {
        switch self {
        case .executable(let path, let device, let inode, let fingerprint):
            guard let now = files.identity(of: path),
                  !Principal.rewritten(now, device: device, inode: inode, fingerprint: fingerprint) else { return nil }
            if let running = identity.executable { return running.file == now.identity ? .executable : nil }
            guard identity.isAlive, let group = identity.status?.effectiveGroup, now.setgidGroup == group,
                  !WritableByUser.userGroups.contains(group) else { return nil }
            return .setgidExecutable
        case .unit(let name):
            guard identity.unit == name, ProcessIdentity.trustsUnit(owner: identity.unitOwner, mountingUser: getuid()) else { return nil }
            return .unit
        }
    }

    /// Whether the file found is the one recorded, with other contents.
    private static func rewritten(_ found: FileIdentityCache.Found,
                                  device: UInt64, inode: UInt64, fingerprint: FileFingerprint?) -> Bool {
        guard let fingerprint, found.identity == FileIdentity(device: device, inode: inode) else { return false }
        return found.fingerprint != fingerprint
    }

    /// Whether both name the same executable path or the same unit, whatever file the path led
    /// to when each was made: a rule for it replaces the other's.
    public func namesSameSubject(as other: Principal) -> Bool {
        switch (self, other) {
        case (.executable(let path, _, _, _), .executable(let otherPath, _, _, _)): path == otherPath
        case (.unit(let name), .unit(let otherName)): name == otherName
        default: false
        }
    }

    /// Whether the file at an executable principal's path is no longer the one the rule was
    /// made for (replaced, gone, or rewritten in place); false for a unit.
    public var fileChanged: Bool {
        guard case .executable(let path, let device, let inode, let fingerprint) = self else { return false }
        var files = FileIdentityCache()
        guard let found = files.identity(of: path), found.identity == FileIdentity(device: device, inode: inode) else { return true }
        return Principal.rewritten(found, device: device, inode: inode, fingerprint: fingerprint)
    }

    /// Whether an executable principal was made before rules recorded the file's fingerprint,
    /// so that a rewrite in place goes unnoticed; false for a unit.
    public var lacksFingerprint: Bool {
        guard case .executable(_, _, _, let fingerprint) = self else { return false }
        return fingerprint == nil
    }

    /// As the command line gives it.
    public var description: String {
        switch self {
        case .executable(let path, _, _, _): "--exe \(path)"
        case .unit(let name): "--unit \(name)"
        }
    }
}
