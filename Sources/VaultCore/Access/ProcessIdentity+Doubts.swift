import Glibc

/// What makes a process less than the program it runs (`ProcessDoubt`), read from /proc when a
/// rule would admit it.
extension ProcessIdentity {
    /// The loader variables that put code of the caller's choosing into a program.
    static let loaderVariableNames = ["LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH"]

    /// The first doubt found, or nil. `secureExecution`: the kernel ran the program with
    /// AT_SECURE (the loader ignores its variables) and keeps its memory from its own user, so
    /// environment and mappings need not be read (they cannot be). `executablePrincipal`: the
    /// rule names an executable, which only the mount's own user namespace can vouch for.
    /// `clearances`: processes found free of the doubts an exec raises, lately.
    public func doubt(secureExecution: Bool, executablePrincipal: Bool, clearances: ProcessClearances? = nil) -> ProcessDoubt? {
        if executablePrincipal, inMountsUserNamespace != true { return .otherUserNamespace }
        guard let status else { return .environmentUnknown }
        if status.tracerPID != 0 { return .traced(by: status.tracerPID) }
        if secureExecution || clearances?.holds(for: self) == true { return nil }
        guard let variables = loaderVariables else { return .environmentUnknown }
        if let first = variables.first { return .loaderVariable(first) }
        if let path = writableCode { return .writableCode(path) }
        clearances?.record(self)
        return nil
    }

    /// Whether the process shares this one's user namespace; nil when unknown (gone). Its
    /// `ns/user` link, else (not dumpable) its `uid_map`, which anyone may read and which a
    /// namespace made by an unprivileged user cannot make equal to its parent's.
    var inMountsUserNamespace: Bool? {
        resolve(\.userNamespace) { directory in
            var theirs = stat()
            if fstatat(directory, "ns/user", &theirs, 0) == 0, let ours = ProcessIdentity.ownUserNamespace {
                return FileIdentity(theirs) == ours
            }
            guard let map = ProcFile.contents("uid_map", in: directory),
                  let own = ProcFile.contents("/proc/self/uid_map", in: AT_FDCWD) else { return nil }
            return map == own
        }
    }

    /// This process's user namespace; a process does not leave its own.
    static let ownUserNamespace: FileIdentity? = FileIdentity.of(path: "/proc/self/ns/user")

    /// The loader variables set in the environment the process was started with; nil when it
    /// cannot be read.
    var loaderVariables: [String]? {
        resolve(\.loaderVariables) { directory in
            guard var bytes = ProcFile.contents("environ", in: directory) else { return nil }
            // The environment may hold secrets of the process: wiped once looked at.
            defer { bytes.withUnsafeMutableBytes { $0.initializeMemory(as: UInt8.self, repeating: 0) } }
            return ProcessIdentity.loaderVariableNames.filter { name in
                let prefix = Array((name + "=").utf8)
                return bytes.split(separator: 0).contains { $0.starts(with: prefix) && $0.count > prefix.count }
            }
        }
    }

    /// The first file mapped executable into the process that the mounting user can change,
    /// or that was deleted (a memfd, or a replaced file: nothing left to judge); nil when
    /// there is none, or the mappings cannot be read.
    var writableCode: String? {
        resolve(\.writableCode) { directory in
            guard let maps = ProcFile.contents("maps", in: directory) else { return nil }
            var seen = Set<String>()
            for line in maps.split(separator: 0x0A) {
                // address perms offset device inode path
                let fields = line.split(separator: 0x20, maxSplits: 5, omittingEmptySubsequences: true)
                guard fields.count == 6, fields[1].count >= 3, fields[1][fields[1].startIndex + 2] == UInt8(ascii: "x") else { continue }
                let path = String(decoding: fields[5].drop(while: { $0 == 0x20 }), as: UTF8.self)
                guard path.hasPrefix("/"), seen.insert(path).inserted else { continue }
                if path.hasSuffix(" (deleted)") { return path }
                var info = stat()
                // The path may lead to another file now: the mapped one was replaced.
                guard stat(path, &info) == 0, UInt64(String(decoding: fields[4], as: UTF8.self)) == UInt64(info.st_ino) else { return path }
                if WritableByUser.file(info) { return path }
            }
            return nil
        }
    }
}
