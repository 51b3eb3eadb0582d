import Glibc

/// Where keychainfs keeps its own files, after the freedesktop Base Directory Specification:
/// `$XDG_DATA_HOME`, `$XDG_STATE_HOME` or `$XDG_CACHE_HOME` when set and not empty, else
/// `~/.local/share`, `~/.local/state` or `~/.cache` under the home directory (`$HOME`, else the
/// password database's), each with `keychainfs` below it.
public enum XDGBaseDirectory: Sendable {
    case data, state, cache

    /// The directory keychainfs's files of this kind go in.
    public var keychainfs: String { base + "/keychainfs" }

    private var base: String {
        let (variable, underHome) = switch self {
        case .data: ("XDG_DATA_HOME", "/.local/share")
        case .state: ("XDG_STATE_HOME", "/.local/state")
        case .cache: ("XDG_CACHE_HOME", "/.cache")
        }
        if let set = XDGBaseDirectory.environment(variable) { return set }
        var home = XDGBaseDirectory.environment("HOME")
        if home == nil, let entry = getpwuid(getuid()) { home = String(cString: entry.pointee.pw_dir) }
        return (home ?? "/") + underHome
    }

    /// An environment variable's value; nil when it is unset or empty (the specification takes
    /// an empty one as unset, and so do keychainfs's own variables).
    public static func environment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
    }
}
