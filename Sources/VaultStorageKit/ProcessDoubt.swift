/// Why a process that a rule's principal names is not trusted to be that program's own work:
/// something other than the program may be reading through it.
public enum ProcessDoubt: Hashable, Sendable, CustomStringConvertible {
    /// It runs in a user namespace other than the mount's, where anyone may relabel a process's
    /// executable (`prctl(PR_SET_MM)`) without running a byte of it.
    case otherUserNamespace
    /// A debugger (or any tracer) may drive it.
    case traced(by: Int32)
    /// It was started with a loader variable that runs or finds code of the caller's choosing.
    case loaderVariable(String)
    /// Its environment cannot be read, and nothing vouches that the loader ignored it.
    case environmentUnknown
    /// It runs code mapped from a file the mounting user can change (or one since deleted).
    case writableCode(String)

    public var description: String {
        switch self {
        case .otherUserNamespace: "it runs in another user namespace"
        case .traced(let tracer): "it is traced by process \(tracer)"
        case .loaderVariable(let name): "it was started with \(name) set"
        case .environmentUnknown: "its environment cannot be read"
        case .writableCode(let path): "it runs code from \(path), which the mounting user can change"
        }
    }
}
