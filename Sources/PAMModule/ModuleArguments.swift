/// The module's arguments on its /etc/pam.d/ line: `vault=PATH` and `mount=PATH` (a leading ~
/// is the user's home) go on to `keychainfs pam-session` and `pam-passwd`; `keychainfs=PATH`
/// names the program (default /usr/local/bin/keychainfs, where scripts/setup installs it).
struct ModuleArguments {
    var program = "/usr/local/bin/keychainfs"
    var passedOn: [String] = []

    init(argc: Int32, argv: PAMArguments) {
        guard let argv else { return }
        for index in 0..<Int(argc) {
            guard let raw = argv[index] else { continue }
            let argument = String(cString: raw)
            if argument.hasPrefix("keychainfs=") {
                program = String(argument.dropFirst("keychainfs=".count))
            } else if argument.hasPrefix("vault=") {
                passedOn += ["--vault", String(argument.dropFirst("vault=".count))]
            } else if argument.hasPrefix("mount=") {
                passedOn += ["--mount", String(argument.dropFirst("mount=".count))]
            }
        }
    }
}
