import Glibc

/// Yama's `kernel.yama.ptrace_scope`. Access rules trust what /proc says a process runs; a
/// process that may ptrace an admitted one (scope 0: any process of the same user) can make it
/// read secrets on its behalf, so rules mean little unless ptrace is restricted.
enum PtraceScope {
    static let file = "/proc/sys/kernel/yama/ptrace_scope"

    /// The scope (0 to 3), or nil when there is no Yama (or its setting cannot be read).
    static func current(file: String = file) -> Int? {
        let fd = open(file, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 16)
        let count = read(fd, &bytes, bytes.count)
        guard count > 0 else { return nil }
        return Int(String(decoding: bytes[..<count].filter { $0 != 0x0A }, as: UTF8.self))
    }

    /// What the mount says when access rules can be worked around by ptrace; nil when ptrace is
    /// restricted (1: only a parent may trace its children, 2: only root, 3: nobody).
    static func warning(scope: Int?) -> String? {
        switch scope {
        case .some(let scope) where scope >= 1:
            nil
        case .some:
            "kernel.yama.ptrace_scope is 0: any process of the mounting user can ptrace a program that access rules admit and read secrets through it; set it to 1 or more (sysctl kernel.yama.ptrace_scope=1)"
        case .none:
            "the kernel has no Yama ptrace restriction (kernel.yama.ptrace_scope is absent): any process of the mounting user can ptrace a program that access rules admit and read secrets through it"
        }
    }
}
